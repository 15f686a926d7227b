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
  cupti_check.py flame FOLDED
      the GPU-weighted flame graph of training steps: GPU time under the
      model's forward (Net.forward) and under backward(); pass when both
      hold a share and train_step is above most of it.
  cupti_check.py cost DIR
      step times of the interleaved bare / traced runs (DIR/*.json named
      MODEL.MODE.REP.json): medians and spread per model and mode.
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


def flame(folded):
    lines = collections.Counter()
    for l in open(folded):
        s, n = l.rstrip("\n").rsplit(" ", 1)
        lines[s] += int(n)
    total = sum(lines.values())

    def share(pred):
        return sum(n for s, n in lines.items() if pred(s)) / total * 100 if total else 0

    py = lambda s: s.split(";[gpu] ")[0]
    fwd = share(lambda s: "Net.forward (" in py(s) and "backward" not in py(s))
    bwd = share(lambda s: "backward (" in py(s))
    step = share(lambda s: "train_step (" in py(s))
    lent = share(lambda s: "[launched by thread " in s)
    print(f"[flame] {total / 1e3:.1f} GPU ms in {len(lines)} stacks: under train_step {step:.1f} %, "
          f"Net.forward {fwd:.1f} %, backward() {bwd:.1f} % (lent across threads {lent:.1f} %)")
    for s, n in lines.most_common(5):
        print(f"  {n / 1e3:9.1f} ms  ...{s[-220:]}")
    ok = fwd >= 10 and bwd >= 20 and step >= 80
    print(f"[flame] forward and backward both shown -> {'PASS' if ok else 'FAIL'}")
    return ok


def cost(d):
    res = collections.defaultdict(lambda: collections.defaultdict(list))
    for p in glob.glob(os.path.join(d, "*.json")):
        model, mode, _rep = os.path.basename(p)[:-5].split(".")
        res[model][mode].append(statistics.median(json.load(open(p))["step_ms"]))
    ok = True
    for model in sorted(res):
        base = statistics.median(res[model]["bare"]) if res[model]["bare"] else 0
        for mode in ("bare", "gpu", "full"):
            v = res[model].get(mode)
            if not v:
                continue
            m = statistics.median(v)
            over = (m / base - 1) * 100 if base else 0
            limit = 15.0 if model == "loop" else 2.0
            flag = "" if mode == "bare" else (" within" if over <= limit else " OVER") + f" {limit:g} %"
            print(f"[cost] {model:12s} {mode:5s} median {m:9.3f} ms/step (runs {', '.join(f'{x:.3f}' for x in sorted(v))})"
                  f"  {over:+6.2f} %{flag}")
            if mode == "gpu" and over > limit:
                ok = False
    return ok


def main():
    what = sys.argv[1]
    if what == "compare":
        ok = compare(*sys.argv[2:7])
    elif what == "flame":
        ok = flame(sys.argv[2])
    else:
        ok = cost(sys.argv[2])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
