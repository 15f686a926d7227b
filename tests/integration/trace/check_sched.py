# SPDX-License-Identifier: MIT
"""Check a trace of the sched probe with switch_events: every sched.switch
with prev_oncpu_ns = V at time T is an instant on its thread and an "oncpu"
slice [T - V, T] on that thread's child track "<thread> oncpu"; the
slices of one thread never overlap (the trace decodes with proper nesting).
Usage: check_sched.py TRACE.pftrace"""
import collections
import sys

import ptrace


def main(path):
    m = ptrace.load_perfetto(path)
    sw = [s for s in m.slices if s.name == "sched.switch"]
    oncpu = collections.defaultdict(set)
    for s in m.slices:
        if s.name == "oncpu" and not s.instant:
            oncpu[m.tracks[s.track].parent].add((s.ts + s.dur, s.dur))
    missing = [(s.track, s.ts, s.args["prev_oncpu_ns"]) for s in sw
               if 0 < s.args["prev_oncpu_ns"] <= s.ts and
               (s.ts, s.args["prev_oncpu_ns"]) not in oncpu[s.track]]
    n = sum(len(v) for v in oncpu.values())
    want = sum(1 for s in sw if 0 < s.args["prev_oncpu_ns"] <= s.ts)
    if missing or n != want or not n:
        print(f"{len(missing)} switches without their oncpu slice {missing[:3]}; "
              f"{n} slices, {want} switches with an on-CPU time")
        sys.exit(1)
    print(f"ok: {len(sw)} switches, {n} oncpu slices on {len(oncpu)} threads")


if __name__ == "__main__":
    main(sys.argv[1])
