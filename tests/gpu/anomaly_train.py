#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/gpu/anomaly.sh's workload: a PyTorch training loop fed by a
multi-process DataLoader whose workers read real files with O_DIRECT.

  anomaly_train.py DATA_DIR LOG (--steps N --slow-at K | --minutes M)

Every sample is one 1 MiB file of DATA_DIR read with O_DIRECT (no page
cache): in one 1 MiB request normally; for the batches from K on
(--slow-at) in 4 KiB requests, --slow-passes times over (4: 1024 requests
a sample, enough to slow the loop on an NVMe disk of 15 us a request as on
a virtual disk of 100 us): the loader is slowed on purpose from a known
batch. The loop logs to LOG (JSON): each step's start (time.time_ns(), the
file sink's clock), the worker pids, K, the batch size.
--minutes M: a clean run of M minutes, nothing slowed.
"""
import argparse
import json
import mmap
import os
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

SAMPLE = 1 << 20


class Files(Dataset):
    def __init__(self, root, count, batch, slow_at, passes):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root))
        self.count, self.batch, self.slow_at = count, batch, slow_at
        self.passes = passes
        self.buf = None

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self.buf is None:  # per worker, page aligned for O_DIRECT
            self.buf = mmap.mmap(-1, SAMPLE)
        slow = self.slow_at >= 0 and i // self.batch >= self.slow_at
        chunk = 4096 if slow else SAMPLE
        fd = os.open(self.paths[i % len(self.paths)], os.O_RDONLY | os.O_DIRECT)
        try:
            view = memoryview(self.buf)
            for _ in range(self.passes if slow else 1):
                for off in range(0, SAMPLE, chunk):
                    os.preadv(fd, [view[off:off + chunk]], off)
        finally:
            os.close(fd)
        x = torch.frombuffer(bytearray(self.buf), dtype=torch.float32)
        return x.view(1, 512, 512).nan_to_num(0.0).clamp(-1, 1), i % 10


def worker_init(_):
    with open(os.environ["ANOMALY_WORKERS"], "a") as f:
        f.write("%d\n" % os.getpid())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        c = 192
        self.f = nn.Sequential(
            nn.Conv2d(1, 64, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(64, c, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(c, c, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(),
            nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10))

    def forward(self, x):
        return self.f(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("log")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--slow-at", type=int, default=-1)
    ap.add_argument("--minutes", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slow-passes", type=int, default=4)
    a = ap.parse_args()
    steps = a.steps if a.steps else 10 ** 9
    os.environ["ANOMALY_WORKERS"] = a.log + ".workers"
    ds = Files(a.data, steps * a.batch, a.batch, a.slow_at, a.slow_passes)
    dl = DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                    worker_init_fn=worker_init, persistent_workers=True,
                    prefetch_factor=2)
    net = Net().cuda()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    t_end = time.monotonic() + a.minutes * 60 if a.minutes else None
    log = {"step_ns": [], "slow_at": a.slow_at, "batch": a.batch,
           "workers": a.workers}
    for i, (x, y) in enumerate(dl):
        log["step_ns"].append(time.time_ns())
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        loss.item()  # one sync a step, as most loops have (logging)
        if t_end and time.monotonic() >= t_end:
            break
        if i + 1 >= steps:
            break
    log["end_ns"] = time.time_ns()
    with open(a.log + ".workers") as f:
        log["worker_pids"] = [int(x) for x in f.read().split()]
    with open(a.log, "w") as f:
        json.dump(log, f)
    d = [(b - a_) / 1e6 for a_, b in zip(log["step_ns"], log["step_ns"][1:])]
    d.sort()
    print("steps %d, median step %.1f ms" % (len(log["step_ns"]), d[len(d) // 2] if d else 0))


if __name__ == "__main__":
    main()
