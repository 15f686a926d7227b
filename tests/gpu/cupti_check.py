#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks of the CUPTI GPU-time validation (tests/gpu/cupti.sh).

  cupti_check.py compare MODEL PROF_A.json PROF_B.json RUN.json EVENTS.jsonl
      per-kernel GPU time of the same steps: ntcore's cuda.kernel_exec events
      between the run's t0 and t1 against the PyTorch profiler's (two
      profiler runs, one before and one after: their difference is the
      run-to-run noise). Pass: the same kernels and counts, total GPU time
      within 2 %, and the GPU-time-weighted mean per-kernel difference within
      2 %.
  cupti_check.py flame FOLDED EVENTS.jsonl RUN.json
      the GPU-weighted flame graph of training steps: GPU time under the
      model's forward (Net.forward) and under backward(); pass when both
      hold a share and train_step is above most of it (>= 80 %), counted
      over the kernels of the measured steps (RUN.json's t0..t1, from the
      kernel events' stacks); the whole run's folded file is shown too.
  cupti_check.py cost DIR
      step times of the interleaved runs (DIR/VARIANT.ROUND.json, each
      with {"models": {MODEL: {"step_ms": [...]}}}): medians and spread per
      model and variant, and where the cost goes (CUPTI's own: raw_* vs
      bare; ntcore's: gpu* vs raw_*); pass when cuda_gpu's defaults (gpu)
      are within +15 % on the loop and +2 % on the training steps.
"""
import collections
import glob
import json
import os
import statistics
import sys


def compare(model, pa, pb, run, events):
    a, b, r = (json.load(open(p)) for p in (pa, pb, run))
    ka, kb = a["kernels"], b["kernels"]
    nt = collections.defaultdict(lambda: [0, 0])
    for line in open(events):
        e = json.loads(line)
        if e.get("type") != "cuda.kernel_exec":
            continue
        if e["start_ns"] >= r["t0"] and e["end_ns"] <= r["t1"]:
            nt[e["name"]][0] += 1
            nt[e["name"]][1] += e["end_ns"] - e["start_ns"]
    prof = {k: (ka.get(k, [0, 0])[0], (ka.get(k, [0, 0])[1] + kb.get(k, [0, 0])[1]) / 2)
            for k in set(ka) | set(kb)}
    tot_p = sum(v[1] for v in prof.values())
    tot_n = sum(v[1] for v in nt.values())
    names = sorted(set(prof) | set(nt), key=lambda k: -prof.get(k, (0, 0))[1])
    count_diff = [k for k in names if prof.get(k, (0, 0))[0] != nt.get(k, [0, 0])[0]]
    rows, wsum, wdiff, noise_w = [], 0.0, 0.0, 0.0
    for k in names:
        p, n = prof.get(k, (0, 0))[1], nt.get(k, [0, 0])[1]
        if not p:
            continue
        d = (n - p) / p * 100
        pa_, pb_ = ka.get(k, [0, 0])[1], kb.get(k, [0, 0])[1]
        noise = abs(pa_ - pb_) / p * 100
        wsum += p
        wdiff += abs(d) * p
        noise_w += noise * p
        rows.append((k, prof[k][0], nt.get(k, [0, 0])[0], p / 1e6, n / 1e6, d, noise))
    total_d = (tot_n - tot_p) / tot_p * 100 if tot_p else 100.0
    wmean = wdiff / wsum if wsum else 100.0
    ok = not count_diff and abs(total_d) <= 2.0 and wmean <= 2.0
    print(f"[{model}] {len(rows)} kernels, steps {len(r['step_ms'])}: GPU time ntcore {tot_n / 1e6:.3f} ms, "
          f"profiler {tot_p / 1e6:.3f} ms (mean of 2 runs): total {total_d:+.2f} %; "
          f"per kernel (time-weighted mean |diff|) {wmean:.2f} %, profiler vs profiler "
          f"{noise_w / wsum if wsum else 0:.2f} %; counts differ for {len(count_diff)} kernels "
          f"-> {'PASS' if ok else 'FAIL'}")
    print(f"  {'kernel':60s} {'prof n':>7s} {'nt n':>7s} {'prof ms':>9s} {'nt ms':>9s} {'diff %':>7s} {'noise %':>7s}")
    for k, pn, nn, p, n, d, noise in rows[:12]:
        print(f"  {k[:60]:60s} {pn:7d} {nn:7d} {p:9.3f} {n:9.3f} {d:+7.2f} {noise:7.2f}")
    for k in count_diff[:5]:
        print(f"  count differs: {k[:80]}: profiler {prof.get(k, (0, 0))[0]}, ntcore {nt.get(k, [0, 0])[0]}")
    return ok


def shares(weights, label):
    """weights: Counter of stack -> GPU time; prints and returns the shares."""
    total = sum(weights.values())

    def share(pred):
        return sum(n for s, n in weights.items() if pred(s)) / total * 100 if total else 0

    py = lambda s: s.split(";[gpu] ")[0]
    r = {"total": total,
         "fwd": share(lambda s: "Net.forward (" in py(s) and "backward" not in py(s)),
         "bwd": share(lambda s: "backward (" in py(s)),
         "step": share(lambda s: "train_step (" in py(s)),
         "lent": share(lambda s: "[launched by thread " in s),
         "nopy": share(lambda s: " (" not in py(s))}
    print(f"[flame] {label}: {total / 1e6:.1f} GPU ms in {len(weights)} stacks: under train_step "
          f"{r['step']:.1f} %, Net.forward {r['fwd']:.1f} %, backward() {r['bwd']:.1f} % "
          f"(lent across threads {r['lent']:.1f} %); no Python stack {r['nopy']:.1f} %")
    return r


def flame(folded, events, run):
    """The GPU-weighted flame graph: the whole run (the folded file, for
    reference: it holds the start-up and warm-up steps too) and, the
    pass mark, the kernels of the measured steps from the kernel events."""
    lines = collections.Counter()
    for l in open(folded):
        s, n = l.rstrip("\n").rsplit(" ", 1)
        lines[s] += int(n) * 1000  # us -> ns
    shares(lines, "whole run (folded)")
    r = json.load(open(run))
    steady = collections.Counter()
    for l in open(events):
        e = json.loads(l)
        if e.get("type") != "cuda.kernel_exec" or not r["t0"] <= e["start_ns"] <= r["t1"]:
            continue
        steady[(e["py_stack"] or e["stack"]) + ";[gpu] " + e["name"]] += e["end_ns"] - e["start_ns"]
    st = shares(steady, f"measured steps ({len(r['step_ms'])}, warm-up and start-up left out)")
    outside = collections.Counter()
    for s, n in steady.items():
        if "train_step (" not in s.split(";[gpu] ")[0]:
            # the innermost Python frame, or the thread for a stack without any
            frames = [f for f in s.split(";[gpu] ")[0].split(";") if " (" in f]
            outside[frames[-1] if frames else "(no Python frame) " + s.split(";")[0][:60]] += n
    for f, n in outside.most_common(4):
        print(f"  outside train_step: {n / 1e6:8.1f} ms  {f[:150]}")
    for s, n in steady.most_common(3):
        print(f"  {n / 1e6:9.1f} ms  ...{s[-200:]}")
    ok = st["fwd"] >= 10 and st["bwd"] >= 20 and st["step"] >= 80
    print(f"[flame] measured steps: forward and backward both shown, >= 80 % under train_step "
          f"-> {'PASS' if ok else 'FAIL'}")
    return ok


LAUNCHES = {"loop": 1000}  # launches per step (cupti_workload.py)
LIMIT = {"loop": 15.0}     # the bars: +15 % launch-bound, +2 % a training step


def cost(d):
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for p in glob.glob(os.path.join(d, "*.json")):
        variant, _rep = os.path.basename(p)[:-5].rsplit(".", 1)
        for model, r in json.load(open(p))["models"].items():
            res[model][variant].append(statistics.median(r["step_ms"]))
    ok = True
    med = {m: {v: statistics.median(x) for v, x in vs.items()} for m, vs in res.items()}
    for model in sorted(res):
        base = med[model].get("bare")
        if not base:
            print(f"[cost] {model}: no bare runs")
            continue
        bare_runs = res[model]["bare"]
        print(f"[cost] {model}: bare {base:.3f} ms/step, spread of the bare runs "
              f"{(max(bare_runs) - min(bare_runs)) / base * 100:.2f} %")
        limit = LIMIT.get(model, 2.0)
        for v in sorted(med[model], key=lambda v: med[model][v]):
            m = med[model][v]
            over = (m / base - 1) * 100
            per = (f" {(m - base) * 1000 / LAUNCHES[model]:+7.2f} us/launch" if model in LAUNCHES else "")
            flag = ""
            if v.startswith(("gpu", "full")):
                flag = (" within" if over <= limit else " OVER") + f" {limit:g} %"
            print(f"[cost]   {v:11s} {m:9.3f} ms/step (runs {', '.join(f'{x:.3f}' for x in sorted(res[model][v]))})"
                  f" {over:+7.2f} %{per}{flag}")
            if v == "gpu" and over > limit:
                ok = False
    parts = (("CUDA_INJECTION64_PATH alone, nothing enabled", "bare", "raw_none"),
             ("CUPTI alone, cuda_gpu's default kinds", "bare", "raw_kernel"),
             ("ntcore around it (cuda_gpu defaults)", "raw_kernel", "gpu"),
             ("the per-event sink (file, every kernel)", "gpu_nosink", "gpu"),
             ("flushing every 200 ms instead of 1 s", "gpu_flush1s", "gpu"),
             ("CUPTI's API records of the join", "raw_kernel", "raw_api"),
             ("  of the 4 launch functions only", "raw_kernel", "raw_launch"),
             ("ntcore around them (api_records)", "raw_api", "gpu_api"),
             ("CUPTI's SYNCHRONIZATION records", "raw_api", "raw_sync"),
             ("ntcore around them (sync)", "raw_sync", "gpu_sync"),
             ("the cuda probe's launch events + stacks, python probe", "gpu_api", "full"))
    print("[cost] where the cost goes (difference of medians; loop per launch, else % of bare):")
    for what, a, b in parts:
        cells = []
        for model in sorted(med):
            if a in med[model] and b in med[model] and med[model].get("bare"):
                diff = med[model][b] - med[model][a]
                cells.append(f"{model} " + (f"{diff * 1000 / LAUNCHES[model]:+.2f} us" if model in LAUNCHES
                                            else f"{diff / med[model]['bare'] * 100:+.2f} %"))
        if cells:
            print(f"[cost]   {what:55s} {'; '.join(cells)}")
    print(f"[cost] cuda_gpu with its defaults within the bars (loop 15 %, training steps 2 %) -> "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


def main():
    what = sys.argv[1]
    if what == "compare":
        ok = compare(*sys.argv[2:7])
    elif what == "flame":
        ok = flame(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        ok = cost(sys.argv[2])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
