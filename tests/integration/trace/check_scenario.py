# SPDX-License-Identifier: MIT
"""Check a trace of the trace_gpufx scenario (tests/fixtures/trace/gpufx.c)
exactly: tracks, slices with names and durations, nesting, flows, state
slices, samples, the unfinished call, the alert and the counter.
Usage: check_scenario.py TRACE.pftrace|TRACE.json LAUNCHES"""
import collections
import sys

import ptrace

PID, TID = 4242, 4243
KERNELS = ["vector_add", "gemm_kernel<float, 128>", "softmax"]
errs = []


def expect(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")


def check_tracks(m):
    proc = m.track_named("fxtrain", "process")
    expect("process pid", proc.pid, PID)
    main, loader = m.thread(PID, TID), m.thread(PID, TID + 1)
    expect("thread names", (main.name, loader.name), ("fxtrain", "fxloader"))
    gpu = m.track_named("GPU 0", "named")
    expect("streams", sorted(t.name for t in m.children(gpu)),
           ["stream 13", "stream 21", "stream 7"])
    expect("thread child tracks", sorted(t.name for t in m.children(main)),
           ["fxtrain oncpu", "fxtrain samples"])
    mem = m.track_named("ntcore_gpufx_memory_bytes{device=0}", "counter")
    expect("counter parent", mem.parent, proc.uuid)
    expect("counter unit", mem.unit, "UNIT_SIZE_BYTES")
    vals = [v for t, ts, v in m.counters if t == mem.uuid]
    expect("counter last value", vals[-1:], [3145728.0])
    return main, gpu


def check_host(m, main, n):
    calls = sorted((s for s in m.on(main, False) if s.name == "cudaLaunchKernel"),
                   key=lambda s: s.ts)
    expect("launch slices", len(calls), n)
    T = calls[0].ts
    expect("launch durations", [s.dur for s in calls], [5000 + i for i in range(n)])
    expect("launch times", [s.ts - T for s in calls], [i * 100000 for i in range(n)])
    expect("launch kernels", [s.args["kernel"] for s in calls],
           [KERNELS[i % 3] for i in range(n)])
    other = collections.Counter((s.name, s.dur) for s in m.on(main, False)
                                if s.name != "cudaLaunchKernel" and s.cat != "open")
    expect("other slices", other, collections.Counter({
        ("cudaMemcpyAsync", 2000): 1, ("cudaDeviceSynchronize", 3000000): 1}))
    # the hung call: one unfinished slice from its entry to the trace's end
    open_ = [s for s in m.on(main, False) if s.cat == "open"]
    expect("unfinished calls", [(s.name, s.ts - T, s.args) for s in open_][:1],
           [("cudaStreamSynchronize", 1900000000, {"unfinished": True})])
    if open_ and open_[0].dur < 1:
        errs.append("the unfinished call has no length")
    inst = collections.Counter(s.name for s in m.on(main, True))
    expect("instants on the thread", inst, collections.Counter({
        "launch": n + 1, "cudaDeviceSynchronize": 1, "cudaStreamSynchronize": 1,
        "gpufx.switch": 1}))
    loader = m.on(m.thread(PID, TID + 1))
    expect("loader slices", [(s.name, s.ts - T, s.dur) for s in loader],
           [("cudaMalloc", 0, 7000)])
    return T


def check_nesting(m, main, T):
    """Each flow source lies inside its launching call, at depth 1."""
    calls = [s for s in m.on(main, False) if s.name.startswith("cuda")]
    for s in m.on(main, True):
        if s.name != "launch":
            continue
        host = [c for c in calls if c.ts <= s.ts <= c.ts + c.dur]
        if len(host) != 1 or s.depth not in (1, None):
            errs.append(f"flow source at {s.ts - T} not inside one call: {host}")


def check_gpu(m, main, gpu, T, n):
    streams = {t.name: t for t in m.children(gpu)}
    k7 = sorted(m.on(streams["stream 7"]), key=lambda s: s.ts)
    k13 = sorted(m.on(streams["stream 13"]), key=lambda s: s.ts)
    want7 = [(KERNELS[i % 3], i * 100000 + 20000, 10000 * (1 + i % 3))
             for i in range(0, n, 2)] + [("memcpy HtoD", 5100000, 50000)]
    want13 = [(KERNELS[i % 3], i * 100000 + 20000, 10000 * (1 + i % 3))
              for i in range(1, n, 2)]
    expect("stream 7", [(s.name, s.ts - T, s.dur) for s in k7], want7)
    expect("stream 13", [(s.name, s.ts - T, s.dur) for s in k13], want13)
    expect("stream 21", [(s.name, s.ts - T, s.dur, s.flow_in)
                         for s in m.on(streams["stream 21"])],
           [("nccl_allreduce", 3000000, 500000, [])])
    # a wait on stream 7 overlapping its first kernel: a child track
    waits = m.children(streams["stream 7"])
    expect("stream 7 child tracks", [t.name for t in waits], ["stream 7 cuda.sync_exec"])
    expect("wait slices", [(s.name, s.ts - T, s.dur) for w in waits for s in m.on(w)],
           [("cudaStreamSynchronize", 25000, 35000)])
    fl = ptrace.flows(m)
    expect("flows", len(fl), n + 1)
    for f, (src, dst) in fl.items():
        if src.track != main.uuid:
            errs.append(f"flow {f} does not start on the launching thread")
        want = dst.args.get("launch_ts_ns")
        if src.ts != want or dst.ts - src.ts != (19000 if dst.name != "memcpy HtoD" else 99500):
            errs.append(f"flow {f}: from {src.ts - T} to {dst.name} at {dst.ts - T}")
    ev = [s for s in k7 + k13 if s.name != "memcpy HtoD"]
    expect("py_stack args", sorted(s.args["correlation"] for s in ev
                                   if s.args["py_stack"]), list(range(100, 100 + n, 2)))


def check_rest(m, main, T):
    kids = {t.name: t for t in m.children(main)}
    expect("oncpu slice", [(s.name, s.ts - T, s.dur) for s in m.on(kids["fxtrain oncpu"])],
           [("oncpu", 600000, 400000)])
    expect("samples", sorted((s.args["count"], s.args["stack"])
                             for s in m.on(kids["fxtrain samples"])),
           [(10, "main;train_step;backward"), (30, "main;train_step;forward")])
    al = m.on(m.track_named("Alerts", "named"))
    expect("alerts", [(s.name, s.ts - T, s.args["severity"], s.args["stack"]) for s in al],
           [("planted: step time doubled", 1500000000, 2, "main;train_step;slow_op")])


def main(path, n):
    if path.endswith(".json"):
        m, _ = ptrace.load_json(path)
    else:
        m = ptrace.load_perfetto(path)
        expect("clock snapshot primary", m.clock.get("primary"), 3)
        expect("clocks", sorted(k for k in m.clock if k != "primary"), [1, 3, 6])
    main_t, gpu = check_tracks(m)
    T = check_host(m, main_t, n)
    check_nesting(m, main_t, T)
    check_gpu(m, main_t, gpu, T, n)
    check_rest(m, main_t, T)
    if errs:
        print("\n".join(errs))
        sys.exit(1)
    print(f"ok: {path}: {len(m.slices)} slices and instants, {len(m.tracks)} tracks")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
