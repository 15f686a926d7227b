#!/bin/bash
# Integration test of the cuda_gpu plugin (root, real BPF) with the fixture
# CUDA runtime and driver and the stand-in CUPTI (tests/fixtures/cuda/), no
# GPU: the job started as `ntcore -- CMD` gets the injection library through
# CUDA_INJECTION64_PATH, its records come back over the socket and are
# joined with the cuda probe's launch events. Checks, exactly:
#   cheap   the defaults (no API records, no sync records): every kernel,
#           copy and set with its exact GPU time, joined to the process only,
#           no sync events, the end-of-process line saying the launch
#           events went unused, the buffers CUPTI is handed come zeroed;
#   join    api_records = true, kinds with sync: every kernel, copy and set
#           joined with its launch event (tid,
#           launch_ts_ns = a cuda.launch/memcpy/memset/graph_launch ts of that
#           thread), GPU durations and counts per kernel, queueing delay, the
#           mangled kernel name demangled, the syncs, the metrics;
#   folded  the GPU-weighted folded stacks: per kernel the microseconds
#           under the workload's calling functions (root first);
#   late    a job's child that connects, runs and exits while the daemon is
#           stopped (so its pid has left the target map when the connection
#           is taken): its records are taken at its proc.exit, nothing
#           refused;
#   nocupti a job whose CUDA has no CUPTI: one "no CUPTI found" line, the job
#           runs; a CUPTI that refuses: one "CUPTI refused" line;
#   userenv CUDA_INJECTION64_PATH set by the user is left alone (said once);
#   attach  -p: one line saying GPU times need `-- CMD`, the rest runs;
#   lost    the daemon killed mid-run: the job carries on to its end;
#   stall   the daemon stopped for 2 s: the job's steps are not held up,
#           the records it could not hand over are counted as drops.
# Usage: cuda_gpu.sh BUILD_ROOT [CASE...]
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
shift || true
FX=$B/plugins/cuda
WL=$FX/cuda_gpu_workload
RT=$FX/libcudart.so.13
for f in cuda.so cuda_gpu.so libntcore-cupti.so.1 libcupti.so.13 libcudart.so.13 libcuda.so.1; do
	[ -e "$FX/$f" ] || fail "$FX/$f is not built"
done
[ -x "$WL" ] || fail "$WL is not built"
nt_test_tmp nt-cuda-gpu
unset LD_LIBRARY_PATH CUDA_INJECTION64_PATH NTCORE_CUPTI_PATH
CASES=${*:-cheap join late nocupti userenv attach lost stall}
STEPS=200

conf() { # NAME EXTRA_GPU_KEYS
	cat > "$T/$1.conf" <<CONF
plugins = (
  # driver layer: every GPU record joins a driver-layer launch event (with
  # "auto", the fixture runtime's first launch, which loads the driver,
  # is counted at the runtime layer during the hand-over: docs/cuda.md)
  { plugin = "cuda"; launch_layer = "driver"; launch_events = true; stacks = true; },
  { plugin = "cuda_gpu"; $2 },
  { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; },
  { plugin = "file"; name = "folded"; path = "$T/$1.folded"; format = "folded";
    events = [ "cuda.gpu_stack" ]; }
);
CONF
}

# The buffers the library hands CUPTI come zeroed, as it told CUPTI.
no_dirty_buffers() { # LOG
	! grep -q "fake_cupti: .* not zeroed" "$1" || { grep "fake_cupti:" "$1" >&2; fail "buffers not zeroed"; }
}

case_cheap() {
	conf cheap ""
	timeout 120 "$NTCORE" -c "$T/cheap.conf" -- "$WL" "$RT" steps $STEPS \
		> "$T/cheap.out" 2> "$T/cheap.err" || { cat "$T/cheap.err" >&2; fail "cheap: ntcore failed"; }
	grep -q "^steps=$STEPS " "$T/cheap.out" || { cat "$T/cheap.out" "$T/cheap.err" >&2; fail "cheap: the workload did not finish"; }
	grep -q "GPU activity from CUPTI 130001 from $FX/libcupti.so.13 for CUDA 13; clock CLOCK_MONOTONIC; kinds kernel,memcpy,memset; no API records" "$T/cheap.err" ||
		{ cat "$T/cheap.err" >&2; fail "cheap: no line saying there are no API records"; }
	grep -q "pid [0-9]* (cuda_gpu_worklo): $((9 * STEPS)) GPU records (no API records: joined to the process only; the cuda probe's launch events go unused: set api_records = true for stacks); lost in the job: 0 (CUPTI buffers), 0 (socket full)" "$T/cheap.err" ||
		{ cat "$T/cheap.err" >&2; fail "cheap: no end-of-process line with the counts"; }
	no_dirty_buffers "$T/cheap.err"
	python3 "$HERE/cuda_gpu/check_cheap.py" "$T/cheap.jsonl" "$T/cheap.folded" $STEPS ||
		{ tail -20 "$T/cheap.err" >&2; fail "cheap: see above"; }
}

case_join() {
	conf join 'api_records = true; kinds = [ "kernel", "memcpy", "memset", "sync" ];'
	timeout 120 "$NTCORE" -c "$T/join.conf" -- "$WL" "$RT" steps $STEPS \
		> "$T/join.out" 2> "$T/join.err" || { cat "$T/join.err" >&2; fail "join: ntcore failed"; }
	grep -q "^steps=$STEPS " "$T/join.out" || { cat "$T/join.out" "$T/join.err" >&2; fail "join: the workload did not finish"; }
	grep -q "GPU activity from CUPTI 130001 from $FX/libcupti.so.13 for CUDA 13; clock CLOCK_MONOTONIC; thread ids gettid" "$T/join.err" ||
		{ cat "$T/join.err" >&2; fail "join: no line naming the CUPTI found next to the runtime"; }
	no_dirty_buffers "$T/join.err"
	python3 "$HERE/cuda_gpu/check_join.py" "$T/join.jsonl" "$T/join.folded" "$T/join.out" $STEPS ||
		{ tail -20 "$T/join.err" >&2; fail "join: see above"; }
}

case_late() {
	# no cuda probe: it holds a job that loads a library until the daemon
	# has probed it, which the stopped daemon would not
	cat > "$T/late.conf" <<CONF
plugins = ( { plugin = "cuda_gpu"; }, { plugin = "file"; path = "$T/late.jsonl"; } );
CONF
	# a child of the job (not the named -- CMD pid, which is let in as such)
	"$NTCORE" -c "$T/late.conf" -- sh -c "sleep 1.5; $WL $RT steps 5; true" \
		> "$T/late.out" 2> "$T/late.err" &
	local nt=$!
	sleep 1
	kill -STOP $nt
	sleep 2.5 # the job connects, runs its 5 steps and exits meanwhile
	kill -CONT $nt
	wait $nt || { cat "$T/late.err" >&2; fail "late: ntcore failed"; }
	grep -q "^steps=5 " "$T/late.out" || fail "late: the job did not finish"
	! grep -q "refused a connection" "$T/late.err" || { cat "$T/late.err" >&2; fail "late: refused"; }
	grep -q "pid [0-9]* (cuda_gpu_worklo): 45 GPU records" "$T/late.err" &&
		[ "$(grep -c '"type":"cuda.kernel_exec"' "$T/late.jsonl")" = 35 ] ||
		{ cat "$T/late.err" >&2; fail "late: the job's 45 GPU records were not taken"; }
}

case_nocupti() {
	# a runtime of a CUDA (99) no CUPTI exists for
	mkdir -p "$T/rt99"
	cp "$RT" "$T/rt99/libcudart.so.99"
	cp "$FX/libcuda.so.1" "$T/rt99/"
	conf nocupti ""
	timeout 60 "$NTCORE" -c "$T/nocupti.conf" -- "$WL" "$T/rt99/libcudart.so.99" steps 20 \
		> "$T/nocupti.out" 2> "$T/nocupti.err" || { cat "$T/nocupti.err" >&2; fail "nocupti: ntcore failed"; }
	grep -q "^steps=20 " "$T/nocupti.out" || fail "nocupti: the workload did not finish"
	[ "$(grep -c "no CUPTI found" "$T/nocupti.err")" = 1 ] ||
		{ cat "$T/nocupti.err" >&2; fail "nocupti: not one 'no CUPTI found' line"; }
	grep -q "no CUPTI found: no libcupti.so.99 for CUDA 99: not loaded, not next to the job's libcudart" "$T/nocupti.err" ||
		{ cat "$T/nocupti.err" >&2; fail "nocupti: the line does not say where it looked"; }
	! grep -q '"cuda.kernel_exec"' "$T/nocupti.jsonl" || fail "nocupti: kernel events without CUPTI?"
	grep -q '"type":"cuda.gpu_process".*"status":"ENOENT"' "$T/nocupti.jsonl" ||
		fail "nocupti: no cuda.gpu_process event with status ENOENT"
	echo "cuda_gpu.sh: nocupti: $(grep -o 'pid [0-9]* ([^)]*): no CUPTI found.*' "$T/nocupti.err")"
	NTFX_CUPTI_FAIL=enable timeout 60 "$NTCORE" -c "$T/nocupti.conf" -- "$WL" "$RT" steps 20 \
		> "$T/refused.out" 2> "$T/refused.err" || fail "refused: ntcore failed"
	grep -q "^steps=20 " "$T/refused.out" || fail "refused: the workload did not finish"
	grep -q "CUPTI refused: cuptiActivityEnable(kernel): CUPTI_ERROR_NOT_INITIALIZED" "$T/refused.err" ||
		{ cat "$T/refused.err" >&2; fail "refused: no 'CUPTI refused' line"; }
}

case_userenv() {
	conf userenv ""
	CUDA_INJECTION64_PATH=/opt/other/libinject.so timeout 60 "$NTCORE" -c "$T/userenv.conf" -- \
		"$WL" "$RT" steps 20 > "$T/userenv.out" 2> "$T/userenv.err" || fail "userenv: ntcore failed"
	grep -q "^steps=20 " "$T/userenv.out" || fail "userenv: the workload did not finish"
	grep -q "CUDA_INJECTION64_PATH is already set in the job's environment (/opt/other/libinject.so): left as it is" "$T/userenv.err" ||
		{ cat "$T/userenv.err" >&2; fail "userenv: no line about the user's CUDA_INJECTION64_PATH"; }
	! grep -q '"cuda.kernel_exec"' "$T/userenv.jsonl" || fail "userenv: injected anyway"
	grep -q '"cuda.launch"' "$T/userenv.jsonl" || fail "userenv: the cuda probe saw nothing"
}

case_attach() {
	"$WL" "$RT" seconds 4 > "$T/attach.wl" 2>&1 &
	local wl=$!
	sleep 0.5
	conf attach ""
	timeout 60 "$NTCORE" -c "$T/attach.conf" -p "$wl" -d 2 > "$T/attach.out" 2> "$T/attach.err" ||
		{ cat "$T/attach.err" >&2; fail "attach: ntcore failed"; }
	wait "$wl" || fail "attach: the workload failed"
	[ "$(grep -c "attached to running processes (-p): CUPTI can only be injected into a job ntcore starts" "$T/attach.err")" = 1 ] ||
		{ cat "$T/attach.err" >&2; fail "attach: not one line about -p"; }
	grep -q '"cuda.launch"' "$T/attach.jsonl" || fail "attach: the cuda probe saw no launch"
	! grep -q '"cuda.kernel_exec"' "$T/attach.jsonl" || fail "attach: kernel events with -p?"
}

case_lost() {
	conf lost ""
	"$NTCORE" -c "$T/lost.conf" -- "$WL" "$RT" seconds 5 > "$T/lost.out" 2> "$T/lost.err" &
	local nt=$! i
	for i in $(seq 100); do grep -q "GPU activity from" "$T/lost.err" && break; sleep 0.1; done
	grep -q "GPU activity from" "$T/lost.err" || { kill -9 $nt; cat "$T/lost.err" >&2; fail "lost: never traced"; }
	sleep 1
	kill -9 $nt
	wait $nt 2>/dev/null || true
	for i in $(seq 150); do grep -q "^steps=" "$T/lost.out" && break; sleep 0.1; done
	grep -q "^steps=" "$T/lost.out" || fail "lost: the job did not carry on to its end after the daemon died"
	echo "cuda_gpu.sh: lost: daemon killed 1 s in, the job went on: $(cat "$T/lost.out")"
}

case_stall() {
	conf stall "flush_ms = 20; buffers = 2; buffer_kb = 64;"
	"$NTCORE" -c "$T/stall.conf" -- "$WL" "$RT" seconds 5 > "$T/stall.out" 2> "$T/stall.err" &
	local nt=$! i
	for i in $(seq 100); do grep -q "GPU activity from" "$T/stall.err" && break; sleep 0.1; done
	sleep 0.5
	kill -STOP $nt
	sleep 2
	kill -CONT $nt
	wait $nt || { cat "$T/stall.err" >&2; fail "stall: ntcore failed"; }
	grep -q "^steps=" "$T/stall.out" || fail "stall: the job did not finish"
	local worst dropped
	worst=$(sed -n 's/.*max_step_us=\([0-9]*\).*/\1/p' "$T/stall.out")
	dropped=$(awk '$1 == "cuda_gpu.0" { print $NF }' "$T/stall.err")
	echo "cuda_gpu.sh: stall: daemon stopped 2 s; slowest step $worst us; records dropped and counted: $dropped"
	[ "$worst" -lt 500000 ] || fail "stall: a step took $worst us while the daemon was stopped"
	[ "${dropped:-0}" -gt 0 ] || { cat "$T/stall.err" >&2; fail "stall: no drop counted"; }
}

for c in $CASES; do
	"case_$c"
	echo "cuda_gpu.sh: $c: ok"
done
echo "PASS cuda_gpu"
