#!/bin/bash
# Issue 19 on the fixtures: kernels inside CUDA graphs counted per kernel at
# each graph launch (stream capture and kernel nodes, runtime and driver
# spellings, exec update and node parameter updates; launches made while
# capturing are not counted), the virtual-memory API booked (cuMemMap /
# cuMemUnmap as cuda.alloc / cuda.free, a failed cuMemCreate as a failed
# allocation), driver allocations of a thread with no known context on
# device 0, and error events with the caller's stack (cudaSetDevice).
# Workload: tests/fixtures/cuda/graph_vmm.c (EXPECTED there). Root (BPF).
# Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
[ -x "$FX/cuda_graph_vmm" ] || fail "cuda_graph_vmm not built"
nt_test_tmp nt-cuda-graphs
unset LD_LIBRARY_PATH

cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; stacks = true; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; }
);
CONF
timeout 60 "$NT" -c "$T/c.conf" -- "$FX/cuda_graph_vmm" > "$T/out" 2> "$T/err" ||
	{ cat "$T/err" >&2; fail "ntcore failed"; }
grep -q "graph_vmm done" "$T/out" || { cat "$T/out" "$T/err" >&2; fail "workload failed"; }
python3 - "$T/out.jsonl" <<'PY' || { cat "$T/err" >&2; fail "issue 19 expectations"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
errs = []
last = {}
for e in ev:
    if e["type"] == "metric" and e["name"] == "ntcore_cuda_launches_total":
        last[e["labels"]["kernel"]] = e["value"]
want = {"graph_add": 41, "graph_scale": 25, "graph_reduce": 7,
        "drv_graph_k": 10, "drv_node_k": 3}
for k, v in want.items():
    if last.get(k) != v:
        errs.append(f"launches of {k}: {last.get(k)}, want {v}")
print("launches:", {k: last.get(k) for k in want})
allocs = [(e["api_name"], e["size"], e["device"], e["ret"]) for e in ev
          if e["type"] == "cuda.alloc" and e["api_name"].startswith("cuMem")]
want_a = [("cuMemMap", 2097152, 0, 0), ("cuMemMap", 4194304, 1, 0),
          ("cuMemCreate", 1 << 40, 1, 2), ("cuMemAlloc_v2", 65536, 0, 0)]
if allocs != want_a:
    errs.append(f"vmm/driver allocations {allocs}, want {want_a}")
frees = [(e["api_name"], e["size"], e["device"]) for e in ev
         if e["type"] == "cuda.free" and e["api_name"].startswith("cuMem")]
want_f = [("cuMemUnmap", 2097152, 0), ("cuMemFree_v2", 65536, 0)]
if frees != want_f:
    errs.append(f"vmm/driver frees {frees}, want {want_f}")
live = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_cuda_memory_bytes"
        and e["labels"].get("device") == "1" and e["labels"].get("kind") == "device"]
if not live or live[-1]["value"] != 4194304:
    errs.append(f"device 1 outstanding {[l['value'] for l in live]}, want 4194304")
er = [e for e in ev if e["type"] == "cuda.error"]
oom = [e for e in er if e["api_name"] == "cuMemCreate"]
if len(oom) != 1 or oom[0]["error_name"] != "CUDA_ERROR_OUT_OF_MEMORY":
    errs.append(f"cuMemCreate errors {[(e['error_name']) for e in oom]}")
sd = [e for e in er if e["api_name"] == "cudaSetDevice"]
if len(sd) != 1 or sd[0]["error_name"] != "cudaErrorInvalidDevice":
    errs.append(f"cudaSetDevice errors {[e['error_name'] for e in sd]}")
elif not sd[0]["stack"].endswith("bad_device;cudaSetDevice") or "main" not in sd[0]["stack"]:
    errs.append(f"cudaSetDevice error stack {sd[0]['stack']!r}")
else:
    print("error stack:", sd[0]["stack"])
if errs:
    print("\n".join(errs)); sys.exit(1)
PY
echo "ok - graph kernels counted per kernel, virtual memory booked, error stacks, driver device"
echo "PASS"
