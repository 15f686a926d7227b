#!/bin/bash
# GPU validation of the nvlink probe on one GPU (issue 15; results and
# commands go to docs/validation.md):
#   util   a bf16 matmul loop (~25 s, 6 GiB held) under ntcore while
#          nvidia-smi --query-gpu is read every second: ntcore's utilisation
#          >= 90 % and memory used within 1 % of nvidia-smi's, sample by
#          sample (nearest ntcore snapshot within 1 s)
#   nccl1  torch.distributed, nccl backend, world size 1, all_reduce of
#          known sizes: ncclAllReduce calls and bytes exact per size; the
#          venv's libnccl found when torch loads it
#   cost   one 60 s matmul job; ntcore with only the NVML poller (100 ms
#          interval, the worst case) started and stopped three times for
#          8 s: median step time with and without the poller
#
#   . .device/env.sh; bash tests/gpu/nvlink.sh [BUNDLE] [OUTDIR] [CHECK...]
#
# BUNDLE: tests/gpu/bundle.sh's .device (core/ntcore, plugins/nvlink/
# nvlink.so, sinks/file/file.so). OUTDIR defaults to $OUT or
# /tmp/nvlink-validate; nvlink-summary.jsonl there has the numbers. Exit 1
# when a check failed. PYTHON must have PyTorch with CUDA.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/nvlink-validate}}
shift 2 2>/dev/null || shift $#
CHECKS=${*:-util nccl1 cost}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
mkdir -p "$O"
W=$(mktemp -d /tmp/nvlink-validate.XXXXXX)
[ -f "$D/env.sh" ] && . "$D/env.sh"
NT=$D/core/ntcore
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks
export PYTHONUNBUFFERED=1
exec > >(tee -a "$O/nvlink.log") 2>&1
S=$O/nvlink-summary.jsonl
: > "$S"
status=0

conf() { # conf NAME NVLINK_KEYS
	cat > "$W/$1.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "nvlink"; $2 },
  { plugin = "file"; path = "$W/$1.jsonl"; metrics = true; interval_ms = 1000;
    events = [ "alert.*", "nccl.*", "dma_fence.*" ]; }
);
CONF
}

run() { # run NAME ARGS...: ntcore -- ARGS, log in $O/NAME.ntcore.log
	local name=$1 t0=$(date +%s%N)
	shift
	timeout 240 "$NT" -c "$W/$name.conf" -- "$@" > "$O/$name.ntcore.log" 2>&1
	local rc=$?
	echo "## $name: ntcore exit $rc after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	grep -E "NVML|NCCL|nvlink|tracepoints|warning|error" "$O/$name.ntcore.log" | head -12
	[ $rc = 0 ] || status=1
	return $rc
}

check() { "$PY" "$HERE/nvlink_check.py" "$@" || status=1; }

echo "### facts"
date -u
uname -r
nvidia-smi -L 2>&1 | head -2
nvidia-smi --query-gpu=driver_version,pci.bus_id --format=csv,noheader 2>&1 | head -1
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'

for c in $CHECKS; do
	case $c in
	util)
		conf util "interval_ms = 500;"
		: > "$W/smi.csv"
		run util "$PY" "$HERE/nvlink_job.py" matmul "$W/util.json" 25 &
		job=$!
		while kill -0 $job 2>/dev/null; do
			t=$(date +%s%N)
			v=$(nvidia-smi -i 0 --query-gpu=utilization.gpu,utilization.memory,memory.used,memory.total,power.draw --format=csv,noheader,nounits 2>/dev/null)
			[ -n "$v" ] && echo "$t, $v" >> "$W/smi.csv"
			sleep 1
		done
		wait $job || status=1
		cp "$W/smi.csv" "$O/util-smi.csv"
		check util "$W/util.jsonl" "$W/smi.csv" "$W/util.json" "$S"
		;;
	nccl1)
		conf nccl1 "interval_ms = 1000;"
		run nccl1 "$PY" "$HERE/nvlink_job.py" allreduce1 "$W/nccl1.json"
		check nccl1 "$W/nccl1.jsonl" "$W/nccl1.json" "$S"
		;;
	cost)
		cat > "$W/cost.conf" <<CONF
plugins = ( { plugin = "nvlink"; interval_ms = 100; nccl = false; dma_fence = false;
              xid_tracepoint = false; } );
CONF
		"$PY" "$HERE/nvlink_job.py" matmul "$W/cost.json" 60 > "$O/cost.job.log" 2>&1 &
		job=$!
		: > "$W/windows"
		sleep 14
		for i in 1 2 3; do
			a=$(date +%s%N)
			"$NT" -c "$W/cost.conf" -d 8 >> "$O/cost.ntcore.log" 2>&1 || status=1
			echo "$a $(date +%s%N)" >> "$W/windows"
			sleep 8
		done
		wait $job || status=1
		grep -E "first poll" "$O/cost.ntcore.log" | head -3
		check cost "$W/cost.json" "$W/windows" "$S"
		;;
	*) echo "unknown check $c"; status=1 ;;
	esac
done
cp "$W"/*.json "$O/" 2>/dev/null
for f in "$W"/*.jsonl; do
	[ -f "$f" ] && gzip -c "$f" > "$O/$(basename "$f").gz"
done
rm -rf "$W"
echo "### nvlink.sh: $([ $status = 0 ] && echo PASS || echo FAIL); numbers in $S"
exit $status
