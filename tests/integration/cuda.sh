#!/bin/bash
# Integration test of the cuda probe against the fixture CUDA runtime and
# driver (tests/fixtures/cuda/) and the C workload linked against them:
# exact launch counts per kernel name at each launch layer, bytes allocated
# and freed, copies per direction with bytes, syncs, error codes with their
# names, pid/tid/cgroup of each event, and the launch and allocation stacks
# naming the workload's calling functions. Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
[ -x "$FX/cuda_workload" ] || fail "fixture workload not built (build plugins/cuda first)"

CG=
test_cleanup() { [ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true; }
nt_test_tmp nt-cuda-it
unset LD_LIBRARY_PATH

# Run the workload in a cgroup of its own (as a container would be), so the
# events' cgroup id can be checked against that cgroup's id (its inode).
CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
[ -n "$CG2" ] || fail "no cgroup2 mount"
CG=$CG2/nt-cuda-it-$$
mkdir "$CG" || fail "cannot create cgroup $CG"
CGID=$(stat -c %i "$CG")

run() { # run NAME CONF_BODY
	local name=$1 body=$2
	cat > "$T/$name.conf" <<CONF
plugins = (
  { plugin = "cuda"; $body },
  { plugin = "file"; path = "$T/$name.jsonl"; metrics = true; }
);
CONF
	if ! timeout 60 "$NT" -c "$T/$name.conf" -- sh -c \
		'echo $$ > "$0/cgroup.procs" && exec "$1"' "$CG" "$FX/cuda_workload" \
		> "$T/$name.out" 2> "$T/$name.err"; then
		cat "$T/$name.err" >&2
		fail "$name: ntcore failed"
	fi
	grep -q "workload done" "$T/$name.out" || { cat "$T/$name.out" "$T/$name.err" >&2; fail "$name: the workload did not finish"; }
}

check() { # check NAME LAYER (runtime|driver|both) EXTRA
	python3 - "$T/$1.jsonl" "$T/$1.out" "$2" "$CGID" "${3:-}" <<'PY'
import json, sys, collections
path, outp, layer, cgid, extra = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
ev = [json.loads(l) for l in open(path)]
out = dict(l.strip().split("=", 1) for l in open(outp) if "=" in l)
errs = []
def expect(what, got, want):
    if got != want:
        errs.append(f"{what}: got {got!r}, want {want!r}")

pid = next(e["pid"] for e in ev if e["type"] == "proc.exit")
metrics = {}
for e in ev:
    if e["type"] == "metric" and e["name"].startswith("ntcore_cuda_"):
        metrics[(e["name"], tuple(sorted(e["labels"].items())))] = e["value"]  # last wins
def m(name, **labels):
    labels.setdefault("pid", str(pid))
    return metrics.get((name, tuple(sorted(labels.items()))))

# launches per kernel name
runtime_k = {"vector_add": 100, "scale_kernel": 50, "reduce_kernel": 7}
want = {}
if layer in ("runtime", "both"):
    want.update(runtime_k)
if layer in ("driver", "both"):
    for k, v in runtime_k.items():
        want[k] = want.get(k, 0) + v
    want["triton_poi_fused_add_0"] = 24
got = {dict(k[1])["kernel"]: v for k, v in metrics.items()
       if k[0] == "ntcore_cuda_launches_total" and dict(k[1])["pid"] == str(pid)}
expect("launches per kernel", got, want)

# allocations, frees, outstanding bytes
expect("device allocs", m("ntcore_cuda_allocs_total", device="0", kind="device"), 5)
expect("device bytes allocated", m("ntcore_cuda_alloc_bytes_total", device="0", kind="device"),
       1048576 + 4194304 + 3000 + 2097152 + 12345)
expect("device frees", m("ntcore_cuda_frees_total", device="0", kind="device"), 4)
expect("device bytes freed", m("ntcore_cuda_free_bytes_total", device="0", kind="device"),
       1048576 + 4194304 + 2097152 + 12345)
expect("device bytes outstanding", m("ntcore_cuda_memory_bytes", device="0", kind="device"), 3000)
expect("managed bytes", m("ntcore_cuda_alloc_bytes_total", device="0", kind="managed"), 8192)
expect("managed frees", m("ntcore_cuda_frees_total", device="0", kind="managed"), 1)
expect("pinned host bytes", m("ntcore_cuda_alloc_bytes_total", device="0", kind="host"), 1048576)
expect("pinned host frees", m("ntcore_cuda_free_bytes_total", device="0", kind="host"), 1048576)

# copies per direction
expect("h2d copies", m("ntcore_cuda_copies_total", direction="h2d"), 7)
expect("h2d bytes", m("ntcore_cuda_copy_bytes_total", direction="h2d"), 6 * 1048576 + 1000)
expect("d2h copies", m("ntcore_cuda_copies_total", direction="d2h"), 3)
expect("d2h bytes", m("ntcore_cuda_copy_bytes_total", direction="d2h"), 3 * 65536)
expect("d2d bytes", m("ntcore_cuda_copy_bytes_total", direction="d2d"), 8192)
if not (m("ntcore_cuda_copy_bandwidth_bytes_per_second", direction="h2d") or 0) > 0:
    errs.append("no h2d bandwidth")
expect("memset events", sum(1 for e in ev if e["type"] == "cuda.memset"), 1)

# synchronisation: 2 ms each in the fixture
expect("stream syncs", m("ntcore_cuda_syncs_total", kind="stream"), 2)
expect("device syncs", m("ntcore_cuda_syncs_total", kind="device"), 1)
s = m("ntcore_cuda_sync_seconds_total", kind="stream") or 0
if not 0.004 <= s < 1:
    errs.append(f"stream sync seconds {s} not in [0.004, 1)")

# errors, by function and name
errors = collections.Counter((e["api_name"], e["error_name"], e["ret"])
                             for e in ev if e["type"] == "cuda.error")
expect("errors", dict(errors), {("cudaMalloc", "cudaErrorMemoryAllocation", 2): 1,
                                ("cudaFree", "cudaErrorInvalidValue", 1): 1,
                                ("cuModuleGetFunction", "CUDA_ERROR_NOT_FOUND", 500): 1})
expect("error metric", m("ntcore_cuda_api_errors_total", function="cudaMalloc",
                         error="cudaErrorMemoryAllocation"), 1)
fa = [e for e in ev if e["type"] == "cuda.alloc" and e["ret"] != 0]
expect("failed alloc size", [e["size"] for e in fa], [1 << 40])

# pid, tid, cgroup of every event
cuda = [e for e in ev if e["type"].startswith("cuda.") and e["type"] not in ("cuda.library", "cuda.report")]
expect("events of other processes", sorted({e["pid"] for e in cuda}), [pid])
expect("cgroup ids", sorted({e["cgroup_id"] for e in cuda}), [cgid])
ttid = int(out["thread_tid"])
if ttid == pid:
    errs.append("the workload's thread has the process id?")
th = [(e["type"], e["size"] if "size" in e else 0) for e in cuda if e["tid"] == ttid]
expect("events of the second thread (type, size)", sorted(th),
       [("cuda.alloc", 12345), ("cuda.free", 12345)])
if not all(e["tid"] == pid for e in cuda if e["tid"] != ttid):
    errs.append("events with a tid that is neither the main thread nor the side thread")

# the per-process report
rep = [e for e in ev if e["type"] == "cuda.report"]
expect("reports", len(rep), 1)
if rep and "still allocated 2.9 KiB in 1 blocks" not in rep[0]["text"]:
    errs.append("report text: " + rep[0]["text"])

if "stacks" in extra:
    launches = collections.Counter(e["kernel"] for e in ev if e["type"] == "cuda.launch")
    expect("cuda.launch events", dict(launches), want)
    va = [e for e in ev if e["type"] == "cuda.launch" and e["kernel"] == "vector_add"]
    if not va or not all("train_step" in e["stack"].split(";") for e in va):
        errs.append("launch stack lacks train_step: " + (va[0]["stack"] if va else "none"))
    if va:
        expect("vector_add grid/block", (va[0]["grid_x"], va[0]["block_x"]), (16, 256))
    sc = [e for e in ev if e["type"] == "cuda.launch" and e["kernel"] == "scale_kernel"]
    if sc:
        expect("scale_kernel dims/shmem", (sc[0]["grid_x"], sc[0]["grid_y"], sc[0]["block_x"],
               sc[0]["block_y"], sc[0]["shared_mem"]), (64, 2, 128, 2, 1024))
    rd = [e for e in ev if e["type"] == "cuda.launch" and e["kernel"] == "reduce_kernel"]
    if rd:
        expect("reduce_kernel (ExC config)", (rd[0]["grid_x"], rd[0]["block_x"], rd[0]["shared_mem"]),
               (8, 512, 4096))
    al = [e for e in ev if e["type"] == "cuda.alloc" and e["size"] == 4194304]
    if not al or "alloc_buffers" not in al[0]["stack"].split(";"):
        errs.append("allocation stack lacks alloc_buffers: " + (al[0]["stack"] if al else "none"))
if "enter" in extra:
    ent = collections.Counter(e["api_name"] for e in ev if e["type"] == "cuda.enter")
    expect("cuda.enter of blocking calls", (ent["cudaStreamSynchronize"], ent["cudaDeviceSynchronize"],
           ent["cudaMemcpy"]), (2, 1, 9))

if errs:
    print("\n".join(errs))
    sys.exit(1)
print(f"ok: pid {pid}, {len(ev)} records")
PY
}

run auto ''
check auto driver || fail "default config (launch_layer auto)"
echo "ok - default: every launch counted once at the driver layer, runtime and direct driver launches named"

run runtime 'launch_layer = "runtime"; stacks = true; launch_events = true; enter_events = true;'
check runtime runtime stacks,enter || fail "runtime layer with stacks"
echo "ok - runtime layer: host-stub names, launch and allocation stacks, per-launch events"

run driverstk 'launch_layer = "driver"; stacks = true; launch_events = true;'
check driverstk driver stacks || fail "driver layer with stacks"
echo "ok - driver layer: kernel names from cuLibraryGetKernel / cuModuleGetFunction"

run both 'launch_layer = "both";'
check both both || fail "both layers"
echo "ok - both layers: a runtime launch counts at each layer"

# The function table: probes from config alone, counts, latency histogram,
# slow-call events (the fixture's cudaDeviceSynchronize blocks 2 ms).
run fntable 'functions = ( { library = "cudart"; threshold_ms = 1.0;
    symbols = [ "cudaStreamCreate", "cudaDeviceSynchronize", "cudaGetDevice" ]; },
  { library = "libcuda.so"; symbols = [ "cuModuleLoadData" ]; threshold_ms = 0.0; } );'
python3 - "$T/fntable.jsonl" <<'PY' || fail "function table"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
m = {}
for e in ev:
    if e["type"] == "metric" and e["name"] in ("ntcore_cuda_calls_total", "ntcore_cuda_slow_calls_total",
                                               "ntcore_cuda_call_seconds"):
        m[(e["name"], e["labels"]["library"], e["labels"]["function"])] = e
def v(n, lib, fn):
    e = m.get((n, lib, fn))
    return None if e is None else (e["count"] if "count" in e else e["value"])
errs = []
for name, lib, fn, want in (("ntcore_cuda_calls_total", "cudart", "cudaStreamCreate", 1),
                            ("ntcore_cuda_calls_total", "cudart", "cudaDeviceSynchronize", 1),
                            ("ntcore_cuda_calls_total", "libcuda.so", "cuModuleLoadData", 1),
                            ("ntcore_cuda_slow_calls_total", "cudart", "cudaDeviceSynchronize", 1),
                            ("ntcore_cuda_call_seconds", "cudart", "cudaDeviceSynchronize", 1)):
    if v(name, lib, fn) != want:
        errs.append(f"{name}{{{lib},{fn}}} = {v(name, lib, fn)}, want {want}")
if v("ntcore_cuda_slow_calls_total", "cudart", "cudaStreamCreate") not in (None, 0):
    errs.append("cudaStreamCreate counted as slow")
h = m.get(("ntcore_cuda_call_seconds", "cudart", "cudaDeviceSynchronize"))
if h and not 0.002 <= h["sum"] < 1:
    errs.append(f"histogram sum {h['sum']}")
slow = [e for e in ev if e["type"] == "cuda.call"]
if [(e["library"], e["symbol"]) for e in slow] != [("cudart", "cudaDeviceSynchronize")] or \
        slow[0]["duration_ns"] < 2000000 or slow[0]["threshold_ns"] != 1000000:
    errs.append(f"cuda.call events: {slow}")
if errs:
    print("\n".join(errs)); sys.exit(1)
PY
echo "ok - function table: counts, latency histogram, slow-call event"
echo "PASS"
