# SPDX-License-Identifier: MIT
"""Check the trace of the cuda_gpu plugin's fixture workload
(tests/fixtures/cuda/gpu_workload.c under the stand-in CUPTI, STEPS steps:
per step fwd_gemm 2 x 30 us, fwd_relu 5 us, bwd_gemm 2 x 60 us, a graph of
graph_kernel_a 7 us and graph_kernel_b 3 us, a 100 us copy, a 2 us set)
against the same run's JSON Lines: device slices per name and duration on
the GPU's stream tracks, every joined one reached by a flow from its
launching call on its thread (the source at launch_ts_ns, where that
call's own event is), the syncs on their own child tracks, proper nesting.
Usage: check_gpu.py TRACE.pftrace EVENTS.jsonl STEPS"""
import collections
import json
import sys

import ptrace

errs = []


def expect(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")


def main(path, jsonl, steps):
    ev = [json.loads(line) for line in open(jsonl)]
    m = ptrace.load_perfetto(path)  # raises on improper nesting
    gpus = [t for t in m.tracks.values() if t.kind == "named" and t.name.startswith("GPU ")]
    streams = {t.uuid: t for g in gpus for t in m.children(g)}
    dev = [s for s in m.slices if s.track in streams]
    want = {"fwd_gemm": (2, 30), "fwd_relu": (1, 5), "bwd_gemm(float*, int)": (2, 60),
            "graph_kernel_a": (1, 7), "graph_kernel_b": (1, 3), "memcpy HtoD": (1, 100),
            "memset": (1, 2)}
    expect("device slices per name", dict(collections.Counter(s.name for s in dev)),
           {k: n * steps for k, (n, _) in want.items()})
    expect("durations", {(s.name, s.dur) for s in dev},
           {(k, us * 1000) for k, (_, us) in want.items()})
    fl = ptrace.flows(m)
    joined = [s for s in dev if s.args.get("launch_ts_ns")]
    expect("flows into device slices", len(fl), len(joined))
    expect("device slices with a flow", sum(1 for s in joined if s.flow_in), len(joined))
    # each flow's source: on the launching thread, at launch_ts_ns, at the
    # time of that thread's own cuda.launch/graph_launch/memcpy/memset event
    threads = {t.uuid: (t.pid, t.tid) for t in m.tracks.values() if t.kind == "thread"}
    host = collections.defaultdict(set)
    for s in m.slices:
        if s.track in threads and s.cat == "cuda" and s.name != "launch":
            host[s.track].add(s.ts)
    for f, (src, dst) in fl.items():
        if src.track not in threads or src.ts != dst.args["launch_ts_ns"] or \
                src.ts not in host[src.track]:
            errs.append(f"flow {f} to {dst.name}: from {src.track} at {src.ts}")
            break
    syncs = [e for e in ev if e["type"] == "cuda.sync_exec"]
    waits = [s for s in m.slices if m.tracks[s.track].name.endswith(" cuda.sync_exec")]
    expect("sync slices on their own tracks", sorted(s.name for s in waits),
           sorted(e["name"] for e in syncs))
    if errs:
        print("\n".join(errs))
        sys.exit(1)
    print(f"ok: {len(dev)} device slices on {len(streams)} stream tracks, {len(fl)} flows, "
          f"{len(waits)} waits")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
