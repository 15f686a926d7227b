#!/bin/bash
# GPU check of cuda_gpu (GPU time from CUPTI), docs/validation.md records runs:
#
#   . .device/env.sh; tests/gpu/cupti.sh [BUNDLE] [OUTDIR]
#
# BUNDLE (default .device, from tests/gpu/bundle.sh) holds core/ntcore,
# plugins/cuda/{cuda.so,cuda_gpu.so,libntcore-cupti.so.1},
# plugins/python/python.so, sinks/file/file.so, bench/libcupti-raw.so.
# OUTDIR: $OUT by default. PYTHON (default /opt/torch/.venv/bin/python)
# has PyTorch with CUDA.
# CUPTI_PARTS (default "facts time flame cost") picks the parts:
#   facts  which libcupti the job gets, what ntcore says about it;
#   time   per-kernel GPU time of the same steps: ntcore vs PyTorch's
#          profiler (a profiler run before and one after), a CNN and a
#          transformer: within 2 %;
#   flame  the GPU-weighted flame graph of a transformer's training steps
#          (cuda probe launch events with stacks + python probe + cuda_gpu
#          with api_records): the GPU time of the measured steps (warm-up
#          and start-up left out) under train_step, Net.forward and
#          backward(), and how much of it has no Python stack;
#   cost   interleaved runs, REPS (default 3) rounds, each round every
#          variant of COST_VARIANTS once (the order rotates per round), one
#          process per variant running the launch-bound loop, the CNN and,
#          for bare/gpu/full, the transformer one after the other. Variants:
#            bare        no injection
#            raw_none    libcupti-raw with nothing enabled (injection alone)
#            raw_kernel  libcupti-raw: CUPTI alone with cuda_gpu's default
#                        kinds (kernel, memcpy, memset, timestamp callback,
#                        zeroed buffers): the floor under `gpu`
#            raw_launch  raw_kernel + API records of the 4 launch functions
#            raw_api     raw_kernel + API records of every function the
#                        join uses (thread ids gettid): the floor under
#                        `gpu_api`
#            raw_sync    raw_api + SYNCHRONIZATION: the floor under gpu_sync
#            gpu         cuda_gpu, defaults (no API records, no sync)
#            gpu_nosink  gpu, no sink writing every kernel event (metrics
#                        and folded stacks only)
#            gpu_api     cuda_gpu, api_records = true
#            gpu_sync    cuda_gpu, api_records = true + sync (the defaults
#                        before round 2 of issue 13)
#            gpu_flush1s gpu with flush_ms = 1000 (cuptiActivityFlushAll
#                        five times less often)
#            full        cuda probe launch events + stacks, python probe,
#                        cuda_gpu with api_records: the flame-graph setup
#          default: bare raw_kernel raw_api raw_sync gpu gpu_api gpu_sync full.
#          The report: median step times and spread, vs bare, per launch
#          on the loop (1000 launches a step), CUPTI's share and ntcore's.
# Results: OUTDIR/cupti.log (the summary), the JSON and folded files.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/cupti-check}}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
PARTS=${CUPTI_PARTS:-facts time flame cost}
REPS=${REPS:-3}
VARIANTS=${COST_VARIANTS:-bare raw_kernel raw_api raw_sync gpu gpu_api gpu_sync full}
WL=$HERE/cupti_workload.py
CHECK=$HERE/cupti_check.py
mkdir -p "$O"
W=$(mktemp -d /tmp/cupti-check.XXXXXX)
NT=$D/core/ntcore
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks PYTHONUNBUFFERED=1
unset CUDA_INJECTION64_PATH
exec > >(tee -a "$O/cupti.log") 2>&1
status=0
say() { printf '\n### %s\n' "$*"; }
for f in core/ntcore plugins/cuda/cuda_gpu.so plugins/cuda/libntcore-cupti.so.1 plugins/cuda/cuda.so; do
	[ -e "$D/$f" ] || { echo "FAIL: $D/$f missing (tests/gpu/bundle.sh)"; exit 1; }
done

conf() { # NAME MODE(gpu|gpu_nosink|gpu_flush1s|gpu_api|gpu_sync|full) JSONL [FOLDED]
	local cuda="" py="" folded="" gpu="" events='"cuda.kernel_exec", "cuda.gpu_process"'
	case $2 in
	gpu_nosink) events='"cuda.gpu_process"' ;;
	gpu_flush1s) gpu='flush_ms = 1000;' ;;
	gpu_api) gpu='api_records = true;' ;;
	gpu_sync) gpu='api_records = true; kinds = [ "kernel", "memcpy", "memset", "sync" ];' ;;
	full)
		gpu='api_records = true;'
		cuda='{ plugin = "cuda"; launch_events = true; stacks = true; },'
		py='{ plugin = "python"; },' ;;
	esac
	[ -n "${4:-}" ] && folded=", { plugin = \"file\"; name = \"folded\"; path = \"$4\"; format = \"folded\"; events = [ \"cuda.gpu_stack\" ]; }"
	cat > "$W/$1.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  $cuda
  $py
  { plugin = "cuda_gpu"; $gpu },
  { plugin = "file"; path = "$3"; events = [ $events ]; }$folded
);
CONF
}

traced() { # CONF ARGS... (the workload under ntcore)
	local c=$1
	shift
	"$NT" -c "$W/$c.conf" -- "$PY" "$WL" "$@"
}

part_facts() {
	say "facts"
	date -u
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1 | head -3
	"$PY" -c 'import torch, os, glob; d = os.path.dirname(os.path.dirname(torch.__file__)); print("torch", torch.__version__, "cuda", torch.version.cuda); print("venv CUPTIs:", sorted(glob.glob(d + "/nvidia/*/lib/libcupti.so*") + glob.glob(d + "/nvidia/cuda_cupti/lib/libcupti.so*") + glob.glob(d + "/triton/backends/nvidia/lib/cupti/libcupti.so*")))'
	conf facts gpu "$W/facts.jsonl"
	traced facts train loop 2 5 "$W/facts.json" 2>&1 | grep -E "cuda_gpu|train loop" | grep -v "probes attached"
	grep -h '"cuda.gpu_process"' "$W/facts.jsonl" | head -2
}

part_time() {
	say "time: per-kernel GPU time, ntcore vs the PyTorch profiler"
	local m
	for m in cnn transformer; do
		"$PY" "$WL" profile $m 10 20 "$O/time.$m.prof_a.json" 2>&1 | tail -1
		conf time_$m gpu "$O/time.$m.jsonl"
		traced time_$m train $m 10 20 "$O/time.$m.run.json" > "$W/time.$m.log" 2>&1 ||
			{ tail -5 "$W/time.$m.log"; status=1; }
		grep -E "GPU records|^train" "$W/time.$m.log"
		"$PY" "$WL" profile $m 10 20 "$O/time.$m.prof_b.json" 2>&1 | tail -1
		"$PY" "$CHECK" compare $m "$O/time.$m.prof_a.json" "$O/time.$m.prof_b.json" \
			"$O/time.$m.run.json" "$O/time.$m.jsonl" || status=1
	done
}

part_flame() {
	say "flame: the GPU-weighted flame graph of training steps"
	# the kernel events with their stacks stay here (tens of MB)
	conf flame full "$W/flame.jsonl" "$O/flame.gpu.folded"
	traced flame train transformer 5 30 "$O/flame.run.json" > "$W/flame.log" 2>&1 ||
		{ tail -5 "$W/flame.log"; status=1; }
	grep -E "GPU records|CUDA launches joined|^train" "$W/flame.log"
	"$PY" "$CHECK" flame "$O/flame.gpu.folded" "$W/flame.jsonl" "$O/flame.run.json" || status=1
}

# The libcupti the job's CUDA gets (the venv's, as cuda_gpu finds it).
job_cupti() {
	"$PY" -c 'import torch, os, glob; d = os.path.dirname(os.path.dirname(torch.__file__)); m = torch.version.cuda.split(".")[0]; print((glob.glob(d + "/nvidia/cu" + m + "/lib/libcupti.so." + m) + glob.glob(d + "/nvidia/cuda_cupti/lib/libcupti.so." + m) + ["libcupti.so." + m])[0])'
}

cost_one() { # VARIANT ROUND CUPTI
	local v=$1 r=$2 spec="loop:20:100,cnn:10:30" mode="" out="$O/cost/$1.$2.json"
	case $v in bare | gpu | full) spec="$spec,transformer:5:20" ;; esac
	case $v in
	raw_none) mode=none ;;
	raw_kernel) mode=ts,kernel,memcpy,memset,zeroed ;;
	raw_launch) mode=ts,kernel,memcpy,memset,zeroed,api_launch ;;
	raw_api) mode=ts,kernel,memcpy,memset,zeroed,api ;;
	raw_sync) mode=ts,kernel,memcpy,memset,zeroed,api,sync ;;
	esac
	rm -f "$W"/cost_*.jsonl
	case $v in
	bare) "$PY" "$WL" train "$spec" "$out" ;;
	raw_*) CUDA_INJECTION64_PATH=$D/bench/libcupti-raw.so RAW_CUPTI=$3 RAW_MODE=$mode \
		"$PY" "$WL" train "$spec" "$out" ;;
	*) traced cost_$v train "$spec" "$out" ;;
	esac > "$W/cost.log" 2>&1 || { tail -5 "$W/cost.log"; status=1; }
	sed -n "s/^/[$v.$r] /; /train \|cupti_raw:\|GPU records/p" "$W/cost.log"
}

part_cost() {
	say "cost: interleaved runs of $VARIANTS ($REPS rounds)"
	local cupti r v i vs
	cupti=$(job_cupti)
	echo "raw CUPTI: $cupti"
	[ -e "$D/bench/libcupti-raw.so" ] || echo "WARN: $D/bench/libcupti-raw.so missing: raw_* variants fail"
	mkdir -p "$O/cost"
	rm -f "$O"/cost/*.json
	for v in gpu gpu_nosink gpu_flush1s gpu_api gpu_sync full; do
		conf cost_$v $v "$W/cost_$v.jsonl"
	done
	read -ra vs <<< "$VARIANTS"
	for r in $(seq 1 "$REPS"); do
		for i in "${!vs[@]}"; do # rotated: no variant always first after a pause
			cost_one "${vs[$(((i + r - 1) % ${#vs[@]}))]}" "$r" "$cupti"
		done
	done
	"$PY" "$CHECK" cost "$O/cost" || status=1
}

for p in $PARTS; do "part_$p"; done
rm -rf "$W"
say "done: status $status (results in $O)"
exit $status
