#!/bin/bash
# Integration test of the trace sink (root: the cuda probe loads BPF).
#  1. the trace_gpufx fixture's scenario (GPU-shaped events with known
#     values), written as Perfetto protobuf and as JSON, decoded and
#     checked exactly: tracks per process, thread, GPU and stream, slices
#     with their names and durations, nesting, flows from launches to
#     kernels, state slices, samples, an unfinished call, alert, counter
#  2. the fixture CUDA workload (tests/fixtures/cuda) under the cuda probe:
#     every timed call a slice of its name, start and duration (checked
#     against the same run's JSON Lines), launches per kernel exactly,
#     nesting, the device-memory counter; the report page names the frames
#  2a. the cuda_gpu plugin on the fixture (stand-in CUPTI): device slices
#     per kernel name and duration, flows from every joined launch
#  2b. the sched probe's switch events: on-CPU slices, exact
#  3. plain mode's size rotation: each part a complete trace on its own
#  4. config errors: FILE:LINE and exit 2
# Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
[ -f "$B/sinks/trace/trace.so" ] || fail "trace sink not built in $B"
PY=/usr/bin/python3
"$PY" -c 'import google.protobuf' 2>/dev/null || fail "python3-protobuf is needed (scripts/setup.sh)"
command -v protoc >/dev/null || fail "protoc is needed (protobuf-compiler)"
TR=$HERE/trace
nt_test_tmp nt-trace-it
export NT_PROTO_OUT=$T/pb2
mkdir -p "$NT_PROTO_OUT"

ntcore() { # NAME ARGS...: ntcore -c $T/NAME.conf ARGS, output in $T/NAME.out
	local name=$1
	shift
	if ! timeout 120 "$NTCORE" -c "$T/$name.conf" "$@" >"$T/$name.out" 2>&1; then
		cat "$T/$name.out" >&2
		fail "$name: ntcore failed"
	fi
}

# ---- 1. the fixture scenario ------------------------------------------
mkdir -p "$T/s1"
cat > "$T/s1.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; launches = 12; },
  { plugin = "trace"; dir = "$T/s1"; prefix = "pf"; counters = [ "ntcore_gpufx_*" ];
    report_memory = [ "ntcore_gpufx_memory_bytes" ]; },
  { plugin = "trace"; name = "tj"; dir = "$T/s1"; prefix = "js"; format = "json";
    counters = [ "ntcore_gpufx_*" ]; }
);
CONF
ntcore s1 -d 1
"$PY" "$TR/check_scenario.py" "$T"/s1/pf-*.pftrace 12 || fail "scenario, Perfetto"
"$PY" "$TR/check_scenario.py" "$T"/s1/js-*.json 12 || fail "scenario, JSON"
grep -q "planted: step time doubled" "$T"/s1/pf-*.html || fail "scenario: report lacks the alert"
echo "ok - scenario: tracks, slices, nesting, flows, counters exact in both formats"

# ---- 2. the fixture CUDA workload -------------------------------------
FX=$B/plugins/cuda
if [ -x "$FX/cuda_workload" ] && [ -f "$B/plugins/cuda/cuda.so" ]; then
	mkdir -p "$T/s2"
	cat > "$T/s2.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "cuda"; launch_layer = "runtime"; launch_events = true; enter_events = true;
    stacks = true; },
  { plugin = "trace"; dir = "$T/s2"; prefix = "pf"; counter_interval_ms = 10; },
  { plugin = "trace"; name = "tj"; dir = "$T/s2"; prefix = "js"; format = "json";
    report = false; },
  { plugin = "file"; path = "$T/s2/events.jsonl"; }
);
CONF
	(unset LD_LIBRARY_PATH; ntcore s2 -- "$FX/cuda_workload")
	"$PY" "$TR/check_cuda.py" "$T"/s2/pf-*.pftrace "$T"/s2/js-*.json "$T/s2/events.jsonl" ||
		fail "cuda workload"
	for frame in main train_step alloc_buffers vector_add cudaLaunchKernel cudaMalloc; do
		grep -q "<title>$frame (" "$T"/s2/pf-*.html || fail "cuda workload: report lacks frame $frame"
	done
	echo "ok - cuda workload: every call a slice with its name and times, launches per kernel, counter"
else
	fail "the fixture CUDA workload is not built (CUDA toolkit headers needed; set CUDA_HOME)"
fi

# ---- 2a. GPU activity from the cuda_gpu plugin (stand-in CUPTI) ----------------
if [ -f "$FX/cuda_gpu.so" ] && [ -x "$FX/cuda_gpu_workload" ]; then
	mkdir -p "$T/g"
	cat > "$T/g.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "cuda"; launch_events = true; stacks = true; },
  { plugin = "cuda_gpu"; api_records = true; kinds = [ "kernel", "memcpy", "memset", "sync" ]; },
  { plugin = "trace"; dir = "$T/g"; prefix = "gpu"; },
  { plugin = "file"; path = "$T/g/events.jsonl"; }
);
CONF
	(unset LD_LIBRARY_PATH CUDA_INJECTION64_PATH NTCORE_CUPTI_PATH
	 ntcore g -- "$FX/cuda_gpu_workload" "$FX/libcudart.so.13" steps 50)
	"$PY" "$TR/check_gpu.py" "$T"/g/gpu-*.pftrace "$T/g/events.jsonl" 50 || fail "cuda_gpu"
	for frame in forward backward fwd_gemm "bwd_gemm(float*, int)"; do
		grep -qF "<title>$frame (" "$T"/g/gpu-*.html || fail "cuda_gpu: report lacks GPU frame $frame"
	done
	echo "ok - cuda_gpu: kernels, copies, sets on stream tracks with flows from their launches, waits apart"
fi

# ---- 2b. scheduler on-CPU slices ----------------------------------------------
if [ -f "$B/plugins/sched/sched.so" ]; then
	mkdir -p "$T/sc"
	cat > "$T/sc.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "sched"; switch_events = true; },
  { plugin = "trace"; dir = "$T/sc"; prefix = "sc"; report = false; }
);
CONF
	ntcore sc -- sh -c 'for i in 1 2 3 4 5; do sleep 0.01; done'
	"$PY" "$TR/check_sched.py" "$T"/sc/sc-*.pftrace || fail "sched: on-CPU slices"
	echo "ok - sched.switch: one oncpu slice per switch, exact, on the thread's child track"
fi

# ---- 3. rotation --------------------------------------------------------
mkdir -p "$T/s3"
cat > "$T/s3.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; mode = "busy"; rate = 20000; },
  { plugin = "trace"; dir = "$T/s3"; prefix = "rot"; max_file_mb = 1; max_files = 3;
    write_buffer_kb = 64; report = false; }
);
CONF
ntcore s3 -d 3
n=$(ls "$T"/s3/rot-*.pftrace | wc -l)
[ "$n" = 3 ] || { ls -la "$T/s3" >&2; fail "rotation: $n parts kept, want 3"; }
for f in "$T"/s3/rot-*.pftrace; do
	"$PY" -c "
import sys; sys.path.insert(0, '$TR'); import ptrace
m = ptrace.load_perfetto('$f')
k = [s for s in m.slices if s.name in ('vector_add', 'softmax', 'gemm_kernel<float, 128>')]
assert m.tracks and k and ptrace.flows(m), 'empty part'
print('$f'.rsplit('/', 1)[1], len(m.slices), 'slices,', len(ptrace.flows(m)), 'flows')
" || fail "rotation: $f does not decode on its own"
done
echo "ok - rotation: 3 parts kept, each a complete trace"

# ---- 4. config errors ----------------------------------------------------
conf() { # NAME KEYS
	printf 'plugins = (\n  { plugin = "trace_gpufx"; },\n  { plugin = "trace"; %s }\n);\n' "$2" > "$T/$1.conf"
}
expect_config_error baddir "dir = \"$T/nope\";" "dir: .*No such file"
expect_config_error badprefix 'prefix = "a/b";' "prefix: must be"
expect_config_error badmode 'mode = "ring";' "mode"
echo "PASS"
