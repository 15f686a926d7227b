#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch workloads for the CUDA detectors' GPU validation
(tests/gpu/detectors.sh; results in docs/validation-detectors.md).

  detectors_workload.py leak [SECONDS]  3 s of a steady training loop, then
        the same loop keeping a 32 MiB tensor in a list every 100 ms
        (prints TREND_START=<wall ns> when the keeping starts)
  detectors_workload.py oom             asks for twice the card's memory
        (prints OOM_AT=<wall ns> after PyTorch's OutOfMemoryError)
  detectors_workload.py clean [SECONDS] a clean training loop (small CNN on
        synthetic data, AdamW, loss.item() every step, eval every 50 steps)
  detectors_workload.py frag            with PYTORCH_NO_CUDA_MEMORY_CACHING=1
        every tensor is a cudaMalloc: 48 x 64 MiB, every other freed, then
        24 x 32 MiB and a 1 GiB tensor, then 0.2 s of training
"""
import os
import sys
import time

import torch

MiB = 1 << 20


def say(k, v):
    print(f"{k}={v}", flush=True)


def cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(),
        torch.nn.Linear(64 * 64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).cuda()


def train(seconds, keep=None, keep_bytes=32 * MiB, keep_every=0.1):
    torch.manual_seed(0)
    model = cnn()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    steps, losses = 0, 0.0
    end = time.time() + seconds
    next_keep = time.time()
    while time.time() < end:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses += loss.item()
        steps += 1
        if steps % 50 == 0:
            with torch.no_grad():
                model.eval()
                acc = (model(x).argmax(1) == y).float().mean().item()
                model.train()
        if keep is not None and time.time() >= next_keep:
            keep.append(torch.empty(keep_bytes, dtype=torch.uint8, device="cuda"))
            next_keep += keep_every
    torch.cuda.synchronize()
    return steps


def main():
    mode = sys.argv[1]
    if mode == "leak":
        secs = float(sys.argv[2]) if len(sys.argv) > 2 else 10
        train(3.0)
        kept = []
        say("TREND_START", time.time_ns())
        steps = train(secs, keep=kept)
        say("KEPT_BYTES", sum(t.numel() for t in kept))
        say("STEPS", steps)
    elif mode == "oom":
        train(1.0)
        free, total = torch.cuda.mem_get_info()
        say("CARD_BYTES", total)
        try:
            torch.empty(2 * total, dtype=torch.uint8, device="cuda")
            say("OOM_AT", 0)
        except torch.OutOfMemoryError as e:
            say("OOM_AT", time.time_ns())
            say("OOM_MSG", str(e).splitlines()[0][:200])
        time.sleep(1.0)
    elif mode == "clean":
        secs = float(sys.argv[2]) if len(sys.argv) > 2 else 60
        steps = train(secs)
        say("STEPS", steps)
        say("RESERVED", torch.cuda.memory_reserved())
    elif mode == "frag":
        assert os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"
        blocks = [torch.empty(64 * MiB, dtype=torch.uint8, device="cuda") for _ in range(48)]
        time.sleep(0.3)
        for i in range(1, 48, 2):
            blocks[i] = None
        time.sleep(0.3)
        small = [torch.empty(32 * MiB, dtype=torch.uint8, device="cuda") for _ in range(24)]
        time.sleep(0.3)
        big = torch.empty(1024 * MiB, dtype=torch.uint8, device="cuda")
        say("BIG_OK", 1)
        time.sleep(1.2)
        del big, small
        steps = train(0.2)
        blocks = None
        say("STEPS", steps)
        time.sleep(1.2)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
