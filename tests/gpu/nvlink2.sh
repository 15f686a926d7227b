#!/bin/bash
# GPU validation of the nvlink probe on two GPUs of one host (issue 16;
# results and commands go to docs/validation.md). NVLink multicast stays
# off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1).
#   ranks   a two-rank torch.distributed job (nccl, one process per GPU)
#           running all_reduce of known sizes: per rank, calls and bytes
#           exact, host durations beside the job's own timings
#   algbw   the same job with CUDA_LAUNCH_BLOCKING=1, so the host call
#           lasts as long as the collective: ntcore's algorithm bandwidth
#           within 10 % of the job's for the 256 MiB size (smaller sizes
#           are printed: there the job's own timing overhead dominates)
#   p2p     4 GiB copied with tensor.to('cuda:1'): the NVLink data
#           counters of GPU 0 (TX) and GPU 1 (RX) moved by at least the
#           bytes copied, within 2 %; the PCIe counters did not carry it
#   hang    rank 1 sleeps 15 s before its first timed all_reduce: an
#           alert.nccl_hang names rank 1, its pid and ncclAllReduce
#
#   . .device/env.sh; bash tests/gpu/nvlink2.sh [BUNDLE] [OUTDIR] [CHECK...]
#
# Exit 1 when a check failed; 77 with "SKIP" when there are not 2 GPUs.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/nvlink2-validate}}
shift 2 2>/dev/null || shift $#
CHECKS=${*:-ranks algbw p2p hang}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
mkdir -p "$O"
W=$(mktemp -d /tmp/nvlink2-validate.XXXXXX)
[ -f "$D/env.sh" ] && . "$D/env.sh"
NT=$D/core/ntcore
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec > >(tee -a "$O/nvlink2.log") 2>&1
S=$O/nvlink2-summary.jsonl
: > "$S"
status=0

n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${n:-0}" -lt 2 ]; then
	echo "SKIP nvlink2: needs 2 GPUs, this machine has ${n:-0}"
	exit 77
fi

conf() { # conf NAME NVLINK_KEYS
	cat > "$W/$1.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "nvlink"; $2 },
  { plugin = "file"; path = "$W/$1.jsonl"; metrics = true; interval_ms = 1000;
    events = [ "alert.*", "nccl.*" ]; }
);
CONF
}

run() { # run NAME ARGS...
	local name=$1 t0=$(date +%s%N) rc
	shift
	timeout 240 "$NT" -c "$W/$name.conf" -- "$@" > "$O/$name.ntcore.log" 2>&1
	rc=$?
	echo "## $name: ntcore exit $rc after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	grep -E "NVML|NCCL|nvlink|warning|error" "$O/$name.ntcore.log" | head -12
	[ $rc = 0 ] || status=1
}

check() { "$PY" "$HERE/nvlink_check.py" "$@" || status=1; }

echo "### facts"
date -u
nvidia-smi -L 2>&1 | head -4
nvidia-smi topo -m 2>&1 | head -4
"$PY" -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(), "p2p", torch.cuda.can_device_access_peer(0, 1))'

for c in $CHECKS; do
	case $c in
	ranks)
		conf ranks "interval_ms = 1000;"
		run ranks "$PY" "$HERE/nvlink_job.py" allreduce2 "$W/ranks.json"
		check nccl2 "$W/ranks.jsonl" "$W/ranks.json" "$S"
		;;
	algbw)
		conf algbw "interval_ms = 1000;"
		CUDA_LAUNCH_BLOCKING=1 run algbw "$PY" "$HERE/nvlink_job.py" allreduce2 "$W/algbw.json"
		check nccl2 "$W/algbw.jsonl" "$W/algbw.json" "$S" algbw
		;;
	p2p)
		conf p2p "interval_ms = 200; nccl = false;"
		run p2p "$PY" "$HERE/nvlink_job.py" p2p "$W/p2p.json" 4
		check p2p "$W/p2p.jsonl" "$W/p2p.json" "$S"
		;;
	hang)
		conf hang "interval_ms = 500; hang_timeout_ms = 5000;"
		run hang "$PY" "$HERE/nvlink_job.py" allreduce2 "$W/hang.json" 15
		check hang "$W/hang.jsonl" "$W/hang.json" "$S"
		;;
	*) echo "unknown check $c"; status=1 ;;
	esac
done
cp "$W"/*.json "$O/" 2>/dev/null
for f in "$W"/*.jsonl; do
	[ -f "$f" ] && gzip -c "$f" > "$O/$(basename "$f").gz"
done
rm -rf "$W"
echo "### nvlink2.sh: $([ $status = 0 ] && echo PASS || echo FAIL); numbers in $S"
exit $status
