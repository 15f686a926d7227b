#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compare what ntcore's cuda probe counted (file-sink JSON Lines) with what
PyTorch's profiler (CUPTI) counted in the same process (cuda_workload.py check).

usage: cuda_compare.py NTCORE.jsonl PROFILER.json LABEL
Exit 0 when launch counts per kernel match exactly and the H2D/D2H bytes equal
what the workload copied; prints a table either way.
"""
import json
import re
import sys
from collections import Counter


def norm(name):
    # formatting differences between demanglers only: spaces
    return re.sub(r"\s+", "", name)


def main():
    nt_path, prof_path, label = sys.argv[1], sys.argv[2], sys.argv[3]
    prof = json.load(open(prof_path))
    pid = str(prof["pid"])
    ev = [json.loads(l) for l in open(nt_path)]
    launches, copy_bytes, copies = {}, {}, {}
    for e in ev:
        if e["type"] != "metric" or e["labels"].get("pid") != pid:
            continue
        if e["name"] == "ntcore_cuda_launches_total":
            launches[e["labels"]["kernel"]] = e["value"]
        elif e["name"] == "ntcore_cuda_copy_bytes_total":
            copy_bytes[e["labels"]["direction"]] = e["value"]
        elif e["name"] == "ntcore_cuda_copies_total":
            copies[e["labels"]["direction"]] = e["value"]
    # profiler annotations on the GPU timeline ("Optimizer.step#SGD.step")
    # are ranges, not kernels (cuda_workload.py drops them since)
    pk = Counter({k: v for k, v in prof["kernels"].items()
                  if not ("#" in k and "(" not in k)})
    nk = Counter(launches)
    ok = True
    exact = pk == nk
    pn, nn = Counter(), Counter()
    for k, v in pk.items():
        pn[norm(k)] += v
    for k, v in nk.items():
        nn[norm(k)] += v
    print(f"== {label}: profiler {sum(pk.values())} launches of {len(pk)} kernels; "
          f"ntcore {sum(nk.values())} launches of {len(nk)} kernels")
    if exact:
        print("   launch counts per kernel: EXACT MATCH (names and counts)")
    elif pn == nn:
        print("   launch counts per kernel: match (names equal up to whitespace)")
    else:
        ok = False
        print("   launch counts per kernel: MISMATCH")
        keys = sorted(set(pn) | set(nn), key=lambda k: -(pn[k] + nn[k]))
        for k in keys:
            if pn[k] != nn[k]:
                print(f"     profiler {pn[k]:6d}  ntcore {nn[k]:6d}  {k[:150]}")
        # how far apart: the multisets of counts
        print(f"     sorted counts profiler {sorted(pk.values(), reverse=True)[:20]}")
        print(f"     sorted counts ntcore   {sorted(nk.values(), reverse=True)[:20]}")
    unnamed = sum(v for k, v in nk.items() if k.startswith("0x"))
    print(f"   unnamed launches (handle only): {unnamed}")
    for d, key in (("h2d", "h2d_bytes"), ("d2h", "d2h_bytes")):
        got, want = copy_bytes.get(d, 0), prof[key]
        flag = "ok" if got == want else "MISMATCH"
        if got != want:
            ok = False
        print(f"   {d} bytes: ntcore {got} ({copies.get(d, 0)} copies), workload copied {want}: {flag}")
    others = {k: v for k, v in copy_bytes.items() if k not in ("h2d", "d2h")}
    if others:
        print(f"   other copy directions: {others}")
    print(f"   verdict: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
