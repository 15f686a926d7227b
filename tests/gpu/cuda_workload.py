#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch workloads for the cuda probe's GPU validation (tests/gpu/cuda_validate.sh).

  cuda_workload.py check OUT.json     deterministic training under torch.profiler
                                      (CUPTI) from the first CUDA call on: writes the
                                      profiler's kernel counts per name and the bytes
                                      this script copied host->device / device->host
  cuda_workload.py compile OUT.json   the same with a torch.compile'd function
                                      (Triton kernels, launched through the driver)
  cuda_workload.py bench DIR          phases driven by DIR/go.N files (see the
                                      script): a launch-bound loop of tiny ops and
                                      a training step, timed, results in DIR/done.N
"""
import json
import os
import statistics
import sys
import time
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile


def kernel_counts(prof):
    k = Counter()
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if e.name.startswith(("Memcpy", "Memset")):
            continue
        # GPU-side ranges of user annotations ("Optimizer.step#SGD.step")
        # are on the CUDA timeline but are not kernels
        if getattr(e, "is_user_annotation", False) or ("#" in e.name and "(" not in e.name):
            continue
        k[e.name] += 1
    return k


def mlp_training(copies):
    """A small MLP trained for 20 steps; every copy it makes is counted."""
    torch.manual_seed(0)
    x = torch.randn(256, 1024)  # 1 MiB on the host
    xs = []
    for _ in range(8):
        xs.append(x.to("cuda"))
        copies["h2d"] += x.numel() * x.element_size()
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    for p in model.parameters():
        copies["h2d"] += p.numel() * p.element_size()
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    out = None
    for step in range(20):
        out = model(xs[step % 8])
        loss = out.square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    y = out.detach().cpu()
    copies["d2h"] += y.numel() * y.element_size()
    z = xs[0][:16].cpu()  # 64 KiB back
    copies["d2h"] += z.numel() * z.element_size()
    torch.cuda.synchronize()


def run_check(path, compiled):
    copies = Counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        mlp_training(copies)
        if compiled:
            @torch.compile
            def f(a, b):
                return (a * b + 1.0).relu().sum(dim=-1)
            a = torch.randn(512, 512, device="cuda")
            b = torch.randn(512, 512, device="cuda")
            for _ in range(10):
                r = f(a, b)
            torch.cuda.synchronize()
            del r
    k = kernel_counts(prof)
    with open(path, "w") as fh:
        json.dump({"pid": os.getpid(), "kernels": k, "h2d_bytes": copies["h2d"],
                   "d2h_bytes": copies["d2h"], "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(0)}, fh)
    print(f"check: pid {os.getpid()}, {sum(k.values())} kernels ({len(k)} names), "
          f"h2d {copies['h2d']} B, d2h {copies['d2h']} B")


# ---------------------------------------------------------------- bench ----

def tiny_loop(n):
    x = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1.0)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e9  # ns per op


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True,
                                                 dropout=0.0)
        self.model = torch.nn.TransformerEncoder(layer, 4).cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.x = torch.randn(32, 512, 1024, device="cuda")

    def step(self):
        out = self.model(self.x)
        loss = out.float().square().mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def time_steps(self, n):
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.step()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e3)
        return ts


def run_bench(d):
    tr = Trainer()
    for _ in range(5):  # warm-up: allocator, cuBLAS heuristics, kernels named
        tr.step()
    tiny_loop(2000)
    with open(os.path.join(d, "ready"), "w") as fh:
        fh.write(str(os.getpid()))
    i = 0
    while True:
        go = os.path.join(d, f"go.{i}")
        while not os.path.exists(go):
            time.sleep(0.01)
        phase = open(go).read().strip()
        if phase == "exit":
            break
        tiny = [tiny_loop(20000) for _ in range(int(os.environ.get("NT_TINY_REPS", "3")))]
        steps = tr.time_steps(12)[2:]
        res = {"phase": phase, "tiny_ns": statistics.median(tiny), "tiny_all": tiny,
               "step_ms": statistics.median(steps), "step_all": steps}
        with open(os.path.join(d, f"done.{i}.tmp"), "w") as fh:
            json.dump(res, fh)
        os.rename(os.path.join(d, f"done.{i}.tmp"), os.path.join(d, f"done.{i}"))
        print(f"phase {i} {phase}: tiny {res['tiny_ns']:.0f} ns/op, step {res['step_ms']:.2f} ms",
              flush=True)
        i += 1


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode in ("check", "compile"):
        run_check(sys.argv[2], mode == "compile")
    elif mode == "bench":
        run_bench(sys.argv[2])
    else:
        sys.exit(f"unknown mode {mode}")
