#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch workloads of the CUPTI check (tests/gpu/cupti.sh).

  cupti_workload.py MODE MODEL WARMUP STEPS OUT.json
  cupti_workload.py train MODEL:WARMUP:STEPS[,MODEL:WARMUP:STEPS...] OUT.json
      (several models one after the other in one process, as the cost
      part runs them: one process start per variant instead of one per
      model; OUT.json then holds {"models": {MODEL: {...}}})

MODEL: cnn (ResNet-50, batch 64, 224x224, SGD), transformer (8 encoder
layers, d_model 1024, seq 512, batch 16, AdamW), loop (launch-bound: 1000
tiny element-wise ops per "step" on a 256-float tensor). Each does WARMUP
steps, then STEPS steps with torch.cuda.synchronize() around each, and
writes OUT.json:
  train    {"t0", "t1": CLOCK_MONOTONIC ns just before the first and after
           the last measured step (the clock of ntcore's events), "step_ms"}
  profile  the same steps under torch.profiler (CUDA activity): adds
           {"kernels": {name: [count, total_ns]}}
"""
import json
import sys
import time
from collections import defaultdict

import torch


class Net(torch.nn.Module):
    """A name for the flame graph: Net.forward wraps the model."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def make(model):
    dev = "cuda"
    if model == "cnn":
        import torchvision
        net = Net(torchvision.models.resnet50(weights=None)).to(dev)
        x = torch.randn(64, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (64,), device=dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        loss_fn = torch.nn.functional.cross_entropy
    elif model == "transformer":
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)
        net = Net(torch.nn.TransformerEncoder(layer, 8)).to(dev)
        x = torch.randn(16, 512, 1024, device=dev)
        y = torch.randn(16, 512, 1024, device=dev)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        loss_fn = torch.nn.functional.mse_loss
    else:
        t = torch.ones(256, device=dev)

        def loop_step():
            z = t
            for _ in range(1000):
                z = z * 1.0001
            return z
        return loop_step

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    return train_step


def run(step, warmup, steps):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    ms = []
    t0 = time.monotonic_ns()
    for _ in range(steps):
        a = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - a) * 1e3)
    t1 = time.monotonic_ns()
    return {"t0": t0, "t1": t1, "step_ms": ms}


def kernels(prof):
    k = defaultdict(lambda: [0, 0])
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if e.name.startswith(("Memcpy", "Memset")):
            continue
        if getattr(e, "is_user_annotation", False) or ("#" in e.name and "(" not in e.name):
            continue
        k[e.name][0] += 1
        k[e.name][1] += int(round((e.time_range.end - e.time_range.start) * 1000))
    return dict(k)


def several(spec, out):
    res = {}
    for item in spec.split(","):
        model, warmup, steps = item.split(":")
        step = make(model)
        r = run(step, int(warmup), int(steps))
        del step
        torch.cuda.empty_cache()
        res[model] = r
        med = sorted(r["step_ms"])[len(r["step_ms"]) // 2]
        print(f"train {model}: {steps} steps, median {med:.3f} ms")
    json.dump({"models": res}, open(out, "w"))


def main():
    torch.backends.cudnn.benchmark = False  # the same kernels in every run
    if ":" in sys.argv[2]:
        several(sys.argv[2], sys.argv[3])
        return
    mode, model, warmup, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    step = make(model)
    if mode == "profile":
        from torch.profiler import ProfilerActivity, profile
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            r = run(step, 0, steps)
        r["kernels"] = kernels(prof)
    else:
        r = run(step, warmup, steps)
    r["model"] = model
    json.dump(r, open(out, "w"))
    med = sorted(r["step_ms"])[len(r["step_ms"]) // 2]
    print(f"{mode} {model}: {steps} steps, median {med:.3f} ms")


if __name__ == "__main__":
    main()
