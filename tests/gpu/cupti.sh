#!/bin/bash
# GPU check of cuda_gpu (GPU time from CUPTI), docs/validation.md records runs:
#
#   . .device/env.sh; tests/gpu/cupti.sh [BUNDLE] [OUTDIR]
#
# BUNDLE (default .device, from tests/gpu/bundle.sh) holds core/ntcore,
# plugins/cuda/{cuda.so,cuda_gpu.so,libntcore-cupti.so.1},
# plugins/python/python.so, sinks/file/file.so. OUTDIR: $OUT by default.
# PYTHON (default /opt/torch/.venv/bin/python) has PyTorch with CUDA.
# CUPTI_PARTS (default "facts time flame cost") picks the parts:
#   facts  which libcupti the job gets, what ntcore says about it;
#   time   per-kernel GPU time of the same steps: ntcore vs PyTorch's
#          profiler (a profiler run before and one after), a CNN and a
#          transformer: within 2 %;
#   flame  the GPU-weighted flame graph of a transformer's training steps
#          (cuda probe launch events with stacks + python probe + cuda_gpu):
#          GPU time under Net.forward and under backward();
#   cost   interleaved runs, REPS (default 3) of each: bare, gpu (cuda_gpu
#          alone) and full (cuda probe launch events + stacks, python probe,
#          cuda_gpu), on the CNN, the transformer (>= 20 ms per step) and a
#          launch-bound loop: median step times and spread.
# Results: OUTDIR/cupti.log (the summary), the JSON and folded files.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/cupti-check}}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
PARTS=${CUPTI_PARTS:-facts time flame cost}
REPS=${REPS:-3}
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

conf() { # NAME MODE(gpu|full) JSONL [FOLDED]
	local cuda="" py="" folded=""
	if [ "$2" = full ]; then
		cuda='{ plugin = "cuda"; launch_events = true; stacks = true; },'
		py='{ plugin = "python"; },'
	fi
	[ -n "${4:-}" ] && folded=", { plugin = \"file\"; name = \"folded\"; path = \"$4\"; format = \"folded\"; events = [ \"cuda.gpu_stack\" ]; }"
	cat > "$W/$1.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  $cuda
  $py
  { plugin = "cuda_gpu"; },
  { plugin = "file"; path = "$3"; events = [ "cuda.kernel_exec", "cuda.gpu_process" ]; }$folded
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
	conf flame full "$W/flame.jsonl" "$O/flame.gpu.folded"
	traced flame train transformer 5 30 "$W/flame.json" > "$W/flame.log" 2>&1 ||
		{ tail -5 "$W/flame.log"; status=1; }
	grep -E "GPU records|CUDA launches joined|^train" "$W/flame.log"
	"$PY" "$CHECK" flame "$O/flame.gpu.folded" || status=1
}

part_cost() {
	say "cost: interleaved bare / gpu / full runs ($REPS each)"
	mkdir -p "$O/cost"
	conf cost_gpu gpu "$W/cost_gpu.jsonl"
	conf cost_full full "$W/cost_full.jsonl"
	local r m mode args
	for r in $(seq 1 "$REPS"); do
		for m in cnn transformer loop; do
			case $m in loop) args="20 100" ;; *) args="10 30" ;; esac
			for mode in bare gpu full; do
				rm -f "$W"/cost_*.jsonl
				if [ $mode = bare ]; then
					"$PY" "$WL" train $m $args "$O/cost/$m.$mode.$r.json" > "$W/cost.log" 2>&1
				else
					traced cost_$mode train $m $args "$O/cost/$m.$mode.$r.json" > "$W/cost.log" 2>&1
				fi || { tail -5 "$W/cost.log"; status=1; }
				grep -hE "^train" "$W/cost.log"
			done
		done
	done
	"$PY" "$CHECK" cost "$O/cost" || status=1
}

for p in $PARTS; do "part_$p"; done
rm -rf "$W"
say "done: status $status (results in $O)"
exit $status
