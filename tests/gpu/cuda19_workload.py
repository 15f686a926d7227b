#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch workloads for issue 19's GPU check (tests/gpu/cuda19.sh).

  cuda19_workload.py graphs OUT.json   a torch.cuda.CUDAGraph replay loop and a
                                       torch.compile(mode="reduce-overhead") model;
                                       each measured window runs under PyTorch's
                                       profiler with 1.5 s of quiet before and after
                                       (ntcore's metric snapshots in the gaps give
                                       its counts for the window); writes the windows
                                       (wall ns) and the profiler's kernel counts
  cuda19_workload.py alerts OUT.json   with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
                                       (set by the caller): leaky_loop() keeps every
                                       tensor in a list, ask_too_much() allocates until
                                       out of memory, bad_device() calls cudaSetDevice(99),
                                       wait_gpu() synchronizes on a kernel that spins
                                       for HANG_S seconds; writes the times and the
                                       allocator's reserved bytes before the OOM
  cuda19_workload.py job STOPFILE      a training loop until STOPFILE exists (at most
                                       400 s), for the attach check; prints "pid N"
"""
import ctypes
import glob
import json
import os
import sys
import time
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_workload import kernel_counts  # noqa: E402  (same folder)

QUIET_S = 1.5


def quiet():
    torch.cuda.synchronize()
    time.sleep(QUIET_S)


def window(name, fn, windows):
    """Run fn under the profiler between two quiet gaps; record it."""
    quiet()
    t0 = time.time_ns()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    t1 = time.time_ns()
    k = kernel_counts(prof)
    windows.append({"name": name, "t0": t0, "t1": t1, "kernels": dict(k)})
    print(f"window {name}: {sum(k.values())} kernels ({len(k)} names)", flush=True)
    quiet()


def model_and_input():
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.GELU(),
        torch.nn.Linear(2048, 1024), torch.nn.LayerNorm(1024)).cuda().eval()
    return m, torch.randn(64, 1024, device="cuda")


def cudagraph_part(windows):
    m, x = model_and_input()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(s):
        for _ in range(3):  # warm-up on a side stream, as PyTorch's docs say
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        y = m(x)
    torch.cuda.synchronize()

    def replays():
        for _ in range(200):
            g.replay()
    window("cudagraph_replay", replays, windows)
    return y


def compiled_part(windows):
    m, x = model_and_input()
    cm = torch.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(5):  # compile, warm up, record the graph
            cm(x)
        torch.cuda.synchronize()

        def calls():
            for _ in range(100):
                cm(x)
        window("compile_reduce_overhead", calls, windows)


def run_graphs(path):
    windows = []
    torch.zeros(1, device="cuda")  # context
    errors = {}
    for name, part in (("cudagraph", cudagraph_part), ("compile", compiled_part)):
        try:
            part(windows)
        except Exception as e:  # noqa: BLE001: reported, the next part runs
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"{name} failed: {errors[name]}", flush=True)
    with open(path, "w") as fh:
        json.dump({"pid": os.getpid(), "windows": windows, "errors": errors,
                   "torch": torch.__version__}, fh)


# ---------------------------------------------------------------- alerts ----

kept = []


# Each planted function stays on the CPU (a busy loop written inline, not a
# helper: the python probe names a call by the thread's newest sample, and a
# helper would be that sample's innermost frame) before its CUDA call.

def leaky_loop(seconds):
    """Keeps every output in a list: a leak the allocator cannot give back."""
    end = time.time() + seconds
    while time.time() < end:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.1:
            pass
        kept.append(torch.empty(32 << 20, dtype=torch.uint8, device="cuda"))


def ask_too_much(info):
    """Allocates 1 GiB tensors until the device is full."""
    held = []
    try:
        while True:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 0.03:
                pass
            info["reserved_before_oom"] = torch.cuda.memory_reserved()
            info["allocated_before_oom"] = torch.cuda.memory_allocated()
            held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError as e:
        info["oom_at_ns"] = time.time_ns()
        info["oom_message"] = str(e)[:300]
        info["held_gib"] = len(held)
    del held


def torch_cudart():
    d = os.path.dirname(os.path.dirname(torch.__file__))
    c = sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", "libcudart.so*")))
    return c[0] if c else "libcudart.so"


def bad_device():
    """cudaSetDevice(99) through the runtime PyTorch loaded: an error."""
    rt = ctypes.CDLL(torch_cudart())
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.05:
        pass
    ret = rt.cudaSetDevice(99)
    # the runtime keeps the error as the thread's last error, and PyTorch's
    # next call would raise it ("invalid device ordinal"): take it back
    rt.cudaGetLastError()
    return ret


def wait_gpu(seconds):
    """Synchronizes on a kernel that spins: a hang as the host sees it."""
    torch.cuda._sleep(int(seconds * 2.0e9))  # cycles, ~2 GHz SM clock
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.05:
        pass
    torch.cuda.synchronize()


def run_alerts(path):
    info = {"pid": os.getpid(), "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    torch.zeros(1, device="cuda")
    time.sleep(1.0)  # the python probe samples this process
    info["leak_start_ns"] = time.time_ns()
    leaky_loop(float(os.environ.get("LEAK_S", "8")))
    info["leak_end_ns"] = time.time_ns()
    info["leak_reserved"] = torch.cuda.memory_reserved()
    kept.clear()
    torch.cuda.empty_cache()
    time.sleep(0.5)
    ask_too_much(info)
    torch.cuda.empty_cache()
    time.sleep(0.5)
    info["bad_device_ret"] = bad_device()
    info["hang_start_ns"] = time.time_ns()
    wait_gpu(float(os.environ.get("HANG_S", "8")))
    info["hang_end_ns"] = time.time_ns()
    with open(path, "w") as fh:
        json.dump(info, fh)
    print("alerts done", json.dumps(info)[:400], flush=True)


# ------------------------------------------------------------------ job ----

def run_job(stop):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, 2).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(16, 128, 512, device="cuda")
    print(f"pid {os.getpid()}", flush=True)
    end = time.time() + 400
    steps = 0
    while not os.path.exists(stop) and time.time() < end:
        out = model(x)
        loss = out.float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        steps += 1
        if steps % 20 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"job done: {steps} steps", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "graphs":
        run_graphs(sys.argv[2])
    elif mode == "alerts":
        run_alerts(sys.argv[2])
    elif mode == "job":
        run_job(sys.argv[2])
    else:
        sys.exit(f"unknown mode {mode}")
