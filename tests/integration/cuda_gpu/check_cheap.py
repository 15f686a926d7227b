# SPDX-License-Identifier: MIT
# Checks of cuda_gpu.sh's cheap case: the plugin's defaults (no CUPTI API
# records, no synchronization records) on gpu_workload (STEPS steps) under
# the stand-in CUPTI's known durations. Every GPU record arrives, with its
# exact GPU time, joined to the process only (no thread, no launch event,
# no queueing delay); no sync events; the folded stacks are per process.
# usage: check_cheap.py JSONL FOLDED STEPS
import collections, json, sys

jsonl, folded, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
ev = [json.loads(l) for l in open(jsonl)]
errs = []


def expect(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")


by = collections.defaultdict(list)
for e in ev:
    by[e["type"]].append(e)
pid = by["proc.exit"][0]["pid"]
kernels = {"fwd_gemm": (2, 30), "fwd_relu": (1, 5), "bwd_gemm(float*, int)": (2, 60),
           "graph_kernel_a": (1, 7), "graph_kernel_b": (1, 3)}
kexec = by["cuda.kernel_exec"]
expect("kernels per name", dict(collections.Counter(e["name"] for e in kexec)),
       {k: n * steps for k, (n, _) in kernels.items()})
for e in kexec:
    expect(f"{e['name']} GPU time", e["end_ns"] - e["start_ns"], kernels.get(e["name"], (0, -1))[1] * 1000)
    expect(f"{e['name']} join", (e["joined"], e["pid"], e["tid"], e["launch_ts_ns"], e["queued_ns"],
                                 e["stack"], e["py_stack"]), (0, pid, 0, 0, 0, "", ""))
    if errs:
        break
for kind, n, ns in (("cuda.memcpy_exec", steps, 100000), ("cuda.memset_exec", steps, 2000)):
    expect(f"{kind} count", len(by[kind]), n)
    expect(f"{kind} GPU time", {e["end_ns"] - e["start_ns"] for e in by[kind]}, {ns})
    expect(f"{kind} joined", {(e["joined"], e["tid"]) for e in by[kind]}, {(0, 0)})
expect("sync events (kind not asked for)", len(by["cuda.sync_exec"]), 0)

metrics = {}
for e in ev:
    if e["type"] == "metric" and e["name"].startswith("ntcore_cuda_gpu_"):
        metrics[(e["name"], tuple(sorted(e["labels"].items())))] = e.get("value", e.get("count"))


def m(name, **labels):
    return metrics.get((name, tuple(sorted(labels.items()))))


for k, (n, us) in kernels.items():
    expect(f"kernels_total {k}", m("ntcore_cuda_gpu_kernels_total", pid=str(pid), kernel=k), n * steps)
expect("records joined", {h: m("ntcore_cuda_gpu_records_total", how=h) for h in ("call", "thread", "none")},
       {"call": None, "thread": None, "none": 9 * steps})
expect("queue delay observations", m("ntcore_cuda_gpu_queue_delay_seconds", pid=str(pid)), None)

lines = collections.Counter()
for l in open(folded):
    stack, n = l.rstrip("\n").rsplit(" ", 1)
    lines[stack] += int(n)
want = {f"[cuda_gpu_worklo];[gpu] {k}": n * us * steps for k, (n, us) in kernels.items()}
want["[cuda_gpu_worklo];[gpu] memcpy HtoD"] = 100 * steps
want["[cuda_gpu_worklo];[gpu] memset"] = 2 * steps
expect("folded", dict(lines), want)

print(f"check_cheap: {len(kexec)} kernels, {len(by['cuda.memcpy_exec'])} copies, "
      f"{len(by['cuda.memset_exec'])} sets, process only; folded lines {len(lines)}")
for e in errs[:20]:
    print("  " + e)
sys.exit(1 if errs else 0)
