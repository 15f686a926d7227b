# SPDX-License-Identifier: MIT
# Checks of cuda_gpu.sh's join case: the events, metrics and GPU-weighted
# folded stacks of gpu_workload (tests/fixtures/cuda/gpu_workload.c, STEPS
# steps) under the stand-in CUPTI's known durations. Exact numbers.
# usage: check_join.py JSONL FOLDED WORKLOAD_OUT STEPS
import collections, json, re, sys

jsonl, folded, wl_out, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ev = [json.loads(l) for l in open(jsonl)]
tid = int(re.search(r"tid=(\d+)", open(wl_out).read()).group(1))
errs = []


def expect(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")


by = collections.defaultdict(list)
for e in ev:
    by[e["type"]].append(e)
pid = by["proc.exit"][0]["pid"]
# the cuda probe's host calls: their hdr.ts_ns in ns since boot is not in
# the JSON (ts is wall clock); match launch_ts_ns through the wall offset
kexec = by["cuda.kernel_exec"]
wall_off = {e["ts"] - e["start_ns"] for e in kexec}
expect("one wall-clock offset for all kernel events", len(wall_off), 1)
off = wall_off.pop() if wall_off else 0
calls = {k: {e["ts"] - off for e in by[k] if e["tid"] == tid}
         for k in ("cuda.launch", "cuda.graph_launch", "cuda.memcpy", "cuda.memset")}

kernels = {"fwd_gemm": (2, 30), "fwd_relu": (1, 5), "bwd_gemm(float*, int)": (2, 60),
           "graph_kernel_a": (1, 7), "graph_kernel_b": (1, 3)}
frames = {"fwd_gemm": "main;train_step;forward;fwd_gemm;cudaLaunchKernel;",
          "fwd_relu": "main;train_step;forward;fwd_relu;cudaLaunchKernel;",
          "bwd_gemm(float*, int)": "main;train_step;backward;bwd_gemm(float*, int);cudaLaunchKernel;"}
count = collections.Counter(e["name"] for e in kexec)
expect("kernels per name", dict(count), {k: n * steps for k, (n, _) in kernels.items()})
for e in kexec:
    n, us = kernels.get(e["name"], (0, -1))
    graph = e["name"].startswith("graph_")
    expect(f"{e['name']} GPU time", e["end_ns"] - e["start_ns"], us * 1000)
    expect(f"{e['name']} joined", e["joined"], 2)
    expect(f"{e['name']} pid/tid", (e["pid"], e["tid"]), (pid, tid))
    if e["launch_ts_ns"] not in calls["cuda.graph_launch" if graph else "cuda.launch"]:
        errs.append(f"{e['name']}: launch_ts_ns {e['launch_ts_ns']} is no host call of tid {tid}")
    if not e["queued_ns"] >= 3000:
        errs.append(f"{e['name']}: queued_ns {e['queued_ns']} < the stand-in's 3 us")
    if not graph and frames[e["name"]] not in e["stack"]:
        errs.append(f"{e['name']}: stack {e['stack']!r} lacks {frames[e['name']]!r}")
    expect(f"{e['name']} py_stack", e["py_stack"], "")
    if errs:
        break

for kind, name, n, nbytes, ns in (("cuda.memcpy_exec", "memcpy HtoD", steps, 1000000, 100000),
                                  ("cuda.memset_exec", "memset", steps, 200000, 2000)):
    rs = by[kind]
    expect(f"{kind} count", len(rs), n)
    expect(f"{kind} names", {e["name"] for e in rs}, {name})
    expect(f"{kind} bytes", {e["bytes"] for e in rs}, {nbytes})
    expect(f"{kind} GPU time", {e["end_ns"] - e["start_ns"] for e in rs}, {ns})
    host = calls["cuda.memcpy" if "memcpy" in kind else "cuda.memset"]
    expect(f"{kind} joined to their host call", sum(e["launch_ts_ns"] in host for e in rs), n)
expect("memcpy kind / bandwidth", {(e["copy_kind"], e["bandwidth"]) for e in by["cuda.memcpy_exec"]},
       {(1, 10e9)})
expect("syncs", sorted((e["sync_kind"], e["name"]) for e in by["cuda.sync_exec"]),
       [(3, "stream synchronize"), (4, "context synchronize")])
expect("gpu_process", [(e["subject_pid"], e["status"], e["cuda_major"]) for e in by["cuda.gpu_process"]],
       [(pid, "OK", 13)])

metrics = {}
for e in ev:
    if e["type"] == "metric" and e["name"].startswith("ntcore_cuda_gpu_"):
        metrics[(e["name"], tuple(sorted(e["labels"].items())))] = e.get("value", e.get("count"))


def m(name, **labels):
    return metrics.get((name, tuple(sorted(labels.items()))))


for k, (n, us) in kernels.items():
    expect(f"kernels_total {k}", m("ntcore_cuda_gpu_kernels_total", pid=str(pid), kernel=k), n * steps)
    got = m("ntcore_cuda_gpu_kernel_seconds_total", pid=str(pid), kernel=k)
    expect(f"kernel_seconds_total {k}", round(got or 0, 9), round(n * steps * us * 1e-6, 9))
expect("memcpy bytes", m("ntcore_cuda_gpu_memcpy_bytes_total", pid=str(pid), kind="h2d"), 1000000 * steps)
expect("memset bytes", m("ntcore_cuda_gpu_memset_bytes_total", pid=str(pid)), 200000 * steps)
expect("queue delay observations", m("ntcore_cuda_gpu_queue_delay_seconds", pid=str(pid)), 7 * steps)
expect("records joined", {h: m("ntcore_cuda_gpu_records_total", how=h) for h in ("call", "thread", "none")},
       {"call": 9 * steps, "thread": None, "none": None})

# the flame graph weighted by GPU microseconds
lines = collections.Counter()
for l in open(folded):
    stack, n = l.rstrip("\n").rsplit(" ", 1)
    lines[stack] += int(n)
want = {}
for k in ("fwd_gemm", "fwd_relu", "bwd_gemm(float*, int)"):
    n, us = kernels[k]
    got = {s: c for s, c in lines.items() if s.endswith(";[gpu] " + k)}
    expect(f"folded lines of {k}", len(got), 1)
    for s, c in got.items():
        if frames[k] not in s or not s.endswith("cuLaunchKernel;[gpu] " + k):
            errs.append(f"folded {k}: {s!r}")
        expect(f"folded GPU us of {k}", c, n * us * steps)
comm = "cuda_gpu_worklo"
for s, us in ((f"[{comm}];cudaMemcpy;[gpu] memcpy HtoD", 100), (f"[{comm}];cudaMemset;[gpu] memset", 2),
              (f"[{comm}];cudaGraphLaunch;[gpu] graph_kernel_a", 7),
              (f"[{comm}];cudaGraphLaunch;[gpu] graph_kernel_b", 3)):
    expect(f"folded {s}", lines.get(s), us * steps)
expect("folded lines", len(lines), 7)

print(f"check_join: {len(kexec)} kernels, {len(by['cuda.memcpy_exec'])} copies, "
      f"{len(by['cuda.memset_exec'])} sets joined; folded: " +
      "; ".join(f"{s.split(';')[-1]} {c}" for s, c in sorted(lines.items())))
for e in errs[:20]:
    print("  " + e)
sys.exit(1 if errs else 0)
