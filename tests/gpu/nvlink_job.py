# SPDX-License-Identifier: MIT
"""Workloads for the nvlink probe's GPU checks (tests/gpu/nvlink.sh and
nvlink2.sh). Each writes what it did as JSON (the path is the first
argument after the mode) so the check compares ntcore's numbers with the
job's own.

  matmul OUT SECONDS          bf16 matmul loop on cuda:0; step times with
                              CLOCK_REALTIME stamps (utilisation, poll cost)
  allreduce1 OUT              torch.distributed nccl, world size 1,
                              all_reduce of known sizes (calls, bytes)
  allreduce2 OUT [SLEEP_S]    two ranks (one process each, cuda:0/cuda:1),
                              the same sizes, each call timed with a
                              synchronize; with SLEEP_S rank 1 sleeps that
                              long before its first all_reduce
  p2p OUT GIB                 GIB GiB copied cuda:0 -> cuda:1 with
                              tensor.to('cuda:1'), stamped
"""
import json
import os
import sys
import time

import torch

# (element count, calls): distinct counts, so torch's own collectives are
# not mistaken for them; the 256 MiB one makes the kernel long enough
# (~1 ms on NVLink) for the job's own timing overhead to stay under 2 %
SIZES = [(1031, 40), (65537, 20), (1048583, 10), (4194319, 5), (67108879, 5)]


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def matmul(out, seconds):
    dev = torch.device("cuda:0")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    keep = torch.empty(int(6 * 2**30), dtype=torch.uint8, device=dev)  # 6 GiB held
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    steps = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = now_ns()
        for _ in range(10):
            c = a @ b
        torch.cuda.synchronize()
        steps.append((t0, now_ns() - t0))
    del c, keep
    json.dump({"steps": steps, "pid": os.getpid()}, open(out, "w"))


def init_pg(rank, world):
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            device_id=torch.device(f"cuda:{rank}"))
    return dist


def run_sizes(dist, rank, timed):
    done = []
    for count, n in SIZES:
        x = torch.ones(count, device=f"cuda:{rank}", dtype=torch.float32)
        times = []
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            dist.all_reduce(x)
            if timed:
                torch.cuda.synchronize()
            times.append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
        done.append({"count": count, "calls": n, "bytes": count * 4 * n,
                     "times_ns": times})
    return done


def allreduce1(out):
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist = init_pg(0, 1)
    done = run_sizes(dist, 0, timed=True)
    dist.destroy_process_group()
    json.dump({"pid": os.getpid(), "sizes": done}, open(out, "w"))


def rank_main(rank, out, sleep_s):
    dist = init_pg(rank, 2)
    x = torch.ones(1024, device=f"cuda:{rank}")
    dist.all_reduce(x)  # warm-up: one call of 1024 floats (not in SIZES)
    torch.cuda.synchronize()
    if sleep_s and rank == 1:
        time.sleep(sleep_s)
    done = run_sizes(dist, rank, timed=True)
    dist.destroy_process_group()
    json.dump({"pid": os.getpid(), "rank": rank, "sizes": done},
              open(f"{out}.rank{rank}", "w"))


def allreduce2(out, sleep_s=0.0):
    import torch.multiprocessing as mp
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    mp.spawn(rank_main, args=(out, sleep_s), nprocs=2, join=True)
    ranks = [json.load(open(f"{out}.rank{r}")) for r in (0, 1)]
    json.dump({"ranks": ranks}, open(out, "w"))


def p2p(out, gib):
    src = torch.ones(int(gib * 2**30) // 4, device="cuda:0", dtype=torch.float32)
    peer = torch.cuda.can_device_access_peer(0, 1)
    torch.cuda.synchronize()
    time.sleep(3)
    t0 = now_ns()
    dst = src.to("cuda:1")
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    t1 = now_ns()
    time.sleep(3)
    ok = bool(dst[-1].item() == 1.0)
    json.dump({"bytes": src.numel() * 4, "start_ns": t0, "end_ns": t1,
               "peer_access": peer, "ok": ok}, open(out, "w"))


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    if mode == "matmul":
        matmul(out, float(rest[0]))
    elif mode == "allreduce1":
        allreduce1(out)
    elif mode == "allreduce2":
        allreduce2(out, float(rest[0]) if rest else 0.0)
    elif mode == "p2p":
        p2p(out, float(rest[0]))
    else:
        sys.exit(f"unknown mode {mode}")
    print(f"nvlink_job {mode} done")
