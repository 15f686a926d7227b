# SPDX-License-Identifier: MIT
"""Check the traces of the fixture CUDA workload (tests/fixtures/cuda,
cuda probe with launch_events, enter_events and stacks) against the same
run's JSON Lines: every timed CUDA call is one slice on its thread with
the call's name, start and duration; launches are instants with their
kernel names in the workload's exact counts; calls nest properly; the
device-memory counter samples are values the probe reported.
Usage: check_cuda.py TRACE.pftrace TRACE.json EVENTS.jsonl"""
import collections
import json
import sys

import ptrace

errs = []


def expect(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")


def host_calls(ev, pid):
    """(tid, name, ts, dur) of every timed call in the JSON Lines (ts wall)."""
    return sorted((e["tid"], e["api_name"], e["ts"], e["duration_ns"]) for e in ev
                  if e["type"].startswith("cuda.") and e.get("pid") == pid and
                  e.get("duration_ns", 0) > 0 and "api_name" in e)


def trace_calls(m, pid):
    threads = {t.uuid: t.tid for t in m.tracks.values() if t.kind == "thread" and t.pid == pid}
    return sorted((threads[s.track], s.name, s.ts, s.dur) for s in m.slices
                  if s.track in threads and not s.instant and s.cat == "cuda")


def check_calls(m, ev, pid, fmt):
    want, got = host_calls(ev, pid), trace_calls(m, pid)
    expect(f"{fmt}: timed calls", len(got), len(want))
    if not want or len(got) != len(want):
        return
    offset = want[0][2] - got[0][2]  # wall - monotonic: one constant
    expect(f"{fmt}: calls (tid, name, wall ts, duration)",
           [(t, n, ts + offset, d) for t, n, ts, d in got], want)
    syncs = collections.Counter(n for _, n, _, d in got if "Synchronize" in n and d >= 2000000)
    expect(f"{fmt}: syncs of >= 2 ms", dict(syncs),
           {"cudaStreamSynchronize": 2, "cudaDeviceSynchronize": 1})


def check_launches(m, pid, fmt):
    threads = {t.uuid for t in m.tracks.values() if t.kind == "thread" and t.pid == pid}
    launches = collections.Counter(s.args.get("kernel") for s in m.slices
                                   if s.track in threads and s.instant and
                                   s.name.startswith("cudaLaunchKernel"))
    expect(f"{fmt}: launch instants per kernel", dict(launches),
           {"vector_add": 100, "scale_kernel": 50, "reduce_kernel": 7})


def check_nesting(m, pid):
    """Each enter instant marks the start of the call it enters (same
    thread, name and timestamp; written first, so it sorts before the
    call's BEGIN and sits beside it, not inside)."""
    for t in m.tracks.values():
        if t.kind != "thread" or t.pid != pid:
            continue
        calls = [s for s in m.on(t, False)]
        for s in m.on(t, True):
            if s.args.get("family") is None:  # cuda.enter carries `family`
                continue
            starts = [c for c in calls if c.name == s.name and c.ts == s.ts]
            if len(starts) != 1:
                errs.append(f"enter {s.name} at {s.ts}: starts {len(starts)} calls")


def check_counter(m, ev, pid):
    proc = [t for t in m.tracks.values() if t.kind == "process" and t.pid == pid]
    name = "ntcore_cuda_memory_bytes{device=0,kind=device}"
    ct = [t for t in m.tracks.values() if t.kind == "counter" and t.name == name]
    if len(proc) != 1 or len(ct) != 1 or ct[0].parent != proc[0].uuid:
        errs.append(f"counter track {name} under the process: {ct} {proc}")
        return
    vals = [v for t, ts, v in m.counters if t == ct[0].uuid]
    seen = {0.0} | {float(e["outstanding_bytes"]) for e in ev
                    if e["type"] in ("cuda.alloc", "cuda.free") and e.get("pid") == pid
                    and e.get("kind") == 1}
    expect("device memory: last sample", vals[-1:], [3000.0])
    if not set(vals) <= seen:
        errs.append(f"device memory samples not reported by the probe: {set(vals) - seen}")


def main(pf, js, jsonl):
    ev = [json.loads(line) for line in open(jsonl)]
    pid = next(e["pid"] for e in ev if e["type"] == "proc.exit")
    m = ptrace.load_perfetto(pf)  # raises on improper nesting
    j, _ = ptrace.load_json(js)
    proc = [t for t in m.tracks.values() if t.kind == "process" and t.pid == pid]
    expect("process track", [t.name for t in proc], ["cuda_workload"])
    for model, fmt in ((m, "perfetto"), (j, "json")):
        check_calls(model, ev, pid, fmt)
        check_launches(model, pid, fmt)
    check_nesting(m, pid)
    check_counter(m, ev, pid)
    expect("flows", len(ptrace.flows(m)), 0)
    if errs:
        print("\n".join(errs))
        sys.exit(1)
    print(f"ok: pid {pid}: {len(trace_calls(m, pid))} calls, "
          f"{sum(1 for s in m.slices if s.instant)} instants, {len(m.counters)} counter samples")


if __name__ == "__main__":
    main(*sys.argv[1:4])
