#!/bin/bash
# GPU validation of the CUDA detectors (docs/validation-detectors.md records a
# run). Runs PyTorch workloads under ntcore with the cuda probe and all five
# detectors configured as conf.d/cuda-detectors.conf ships them:
#   leak   a loop that keeps a 32 MiB tensor in a list every 100 ms after a
#          steady warm-up: alert.cuda_memleak within 5 s of the trend's start
#   oom    a request for twice the card's memory: alert.cuda_oom
#   clean  a clean training loop for 60 s: no alert at all
#   frag   PYTORCH_NO_CUDA_MEMORY_CACHING=1 blocks with holes: the memory
#          timeline picture of a real run (frag-dev0.svg; clean-dev0.svg and
#          leak-dev0.svg too)
#
#   tests/gpu/detectors.sh [BUNDLE] [OUTDIR] [SCENARIO...]
#
# BUNDLE: a build bundled with /work/shared/tools/device-bundle (default
# .device; it needs core/ntcore, plugins/cuda/cuda.so,
# plugins/cuda/detectors/cuda_*.so, sinks/file/file.so). OUTDIR defaults to
# $OUT or /tmp/detectors-validate. PYTHON must have PyTorch with CUDA.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/detectors-validate}}
shift 2 2>/dev/null || shift $#
SCEN=${*:-leak oom clean frag}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p "$O"
W=$(mktemp -d /tmp/detectors-validate.XXXXXX)
[ -f "$D/env.sh" ] && . "$D/env.sh"
NT=$D/core/ntcore
export NTCORE_PLUGIN_PATH=$D/plugins:$D/plugins/cuda/detectors:$D/sinks
export PYTHONUNBUFFERED=1
exec > >(tee -a "$O/detectors.log") 2>&1
status=0

# conf NAME: the shipped detector settings, the file sink into $W
conf() {
	cat > "$W/$1.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; stacks = true; launch_events = true; enter_events = true; },
  { plugin = "cuda_memleak"; window_ms = 500; windows = 8; threshold = 0.8;
    min_growth_bytes = 33554432; exit_report = true; },
  { plugin = "cuda_oom"; recent = 8; },
  { plugin = "cuda_errors"; interval_ms = 10000; max_alerts = 20; },
  { plugin = "cuda_frag"; interval_ms = 1000; threshold = 70.0;
    svg_path = "$W/$1-dev%d.svg"; },
  { plugin = "cuda_hang"; timeout_ms = 30000; interval_ms = 1000; },
  { plugin = "file"; path = "$W/$1.jsonl"; metrics = true; interval_ms = 1000;
    events = [ "alert.*", "cuda_memleak.report", "cuda.alloc", "cuda.free",
               "cuda.error" ]; }
);
CONF
}

run() { # run NAME ARGS...: workload stdout to $W/NAME.out
	local name=$1
	shift
	conf "$name"
	local t0=$(date +%s%N)
	timeout 280 "$NT" -c "$W/$name.conf" -- sh -c 'o=$1; shift; exec "$@" > "$o"' \
		sh "$W/$name.out" "$@" > "$W/$name.log" 2>&1
	local rc=$?
	echo "## $name: ntcore exit $rc after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	grep -E "probes attached|launches probed|alert|warning|error" "$W/$name.log" | head -20
	cat "$W/$name.out"
	[ $rc = 0 ] || status=1
}

echo "### facts"
date -u
uname -r
nvidia-smi -L 2>&1 | head -2
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'

for s in $SCEN; do
	case $s in
	leak) run leak "$PY" "$HERE/detectors_workload.py" leak 10 ;;
	oom) run oom "$PY" "$HERE/detectors_workload.py" oom ;;
	clean) run clean "$PY" "$HERE/detectors_workload.py" clean 60 ;;
	frag) PYTORCH_NO_CUDA_MEMORY_CACHING=1 run frag "$PY" "$HERE/detectors_workload.py" frag ;;
	esac
	"$PY" "$HERE/detectors_check.py" "$s" "$W" || status=1
	case $s in leak|clean|frag) cp "$W/$s-dev0.svg" "$O/" 2>/dev/null ;; esac
done

echo "### result: $([ $status = 0 ] && echo PASS || echo FAIL)"
tar -C "$W" -czf "$O/detectors-files.tgz" . 2>/dev/null
rm -rf "$W"
exit $status
