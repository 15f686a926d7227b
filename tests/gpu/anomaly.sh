#!/bin/bash
# GPU validation of the anomaly detector: a PyTorch training loop (a conv
# net, batches of 16 one-MiB samples) fed by a DataLoader of 4 worker
# processes that read real files with O_DIRECT (tests/gpu/anomaly_train.py),
# under ntcore with the cuda probe (launch events: the step is found from the
# repeating kernel sequence), the io probe and the anomaly detector with its
# defaults (conf.d/anomaly.conf's probe settings):
#   slow   from batch SLOW_AT (400 of STEPS 440) on, the workers read each
#          sample in 4 KiB requests, 4 times over, instead of one request:
#          the step alert must come within 3 steps of the first slow step
#          and name a loader worker's I/O as what moved; no alert before
#   clean  the same loop, nothing slowed, for MINUTES (5): no alert at all
# Prints the step numbers and the alert texts; files under $OUT.
#   . .device/env.sh; bash tests/gpu/anomaly.sh [BUNDLE] [MINUTES]
# BUNDLE: ALL=1 tests/gpu/bundle.sh (default .device). DATA_DIR: where the
# 1 GiB of sample files go (default: the first of $NTCORE_IO_TEST_DIR, the
# repository, /var/tmp, /root on a block device).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
D=$(cd "${1:-.device}" && pwd)
MINUTES=${2:-${MINUTES:-5}}
O=${OUT:-/tmp/anomaly-gpu}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
SLOW_AT=${SLOW_AT:-400}
STEPS=${STEPS:-440}
mkdir -p "$O"
[ -f "$D/env.sh" ] && . "$D/env.sh"
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks PYTHONUNBUFFERED=1
exec > >(tee -a "$O/anomaly.log") 2>&1
for f in core/ntcore plugins/cuda/cuda.so plugins/io/io.so plugins/anomaly/anomaly.so sinks/file/file.so; do
	[ -e "$D/$f" ] || { echo "no $D/$f: build the bundle with ALL=1 tests/gpu/bundle.sh"; exit 1; }
done

on_block() {
	python3 - "$1" <<'EOF'
import os, sys
st = os.stat(sys.argv[1])
ok = os.major(st.st_dev) != 0 and os.path.exists("/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)))
sys.exit(0 if ok else 1)
EOF
}
DATA=${DATA_DIR:-}
if [ -z "$DATA" ]; then
	for d in ${NTCORE_IO_TEST_DIR:-} "$ROOT" /var/tmp /root; do
		[ -d "$d" ] && [ -w "$d" ] || continue
		case $(stat -f -c %T "$d") in tmpfs | ramfs | overlayfs | fuseblk | nfs*) continue ;; esac
		on_block "$d" && { DATA=$d/anomaly-gpu-data; break; }
	done
fi
[ -n "$DATA" ] || { echo "no writable directory on a block device: set DATA_DIR"; exit 1; }
mkdir -p "$DATA"
echo "### facts"
date -u
uname -r
nvidia-smi -L 2>&1 | head -2
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
echo "data: $DATA ($(stat -f -c %T "$DATA"), $(df -h "$DATA" | tail -1 | awk '{print $1}'))"
if [ "$(ls "$DATA" | wc -l)" -lt 1024 ]; then
	for i in $(seq -w 0 1023); do
		dd if=/dev/urandom of="$DATA/s$i" bs=1M count=1 oflag=direct status=none
	done
fi

conf() {
	cat > "$O/$1.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; launch_events = true; },
  { plugin = "io"; interval_ms = 100; report_interval_s = 0; slow_threshold_ms = 200.0; },
  { plugin = "anomaly"; interval_ms = 100; },
  { plugin = "file"; path = "$O/$1.jsonl"; events = [ "alert.*", "io.slow" ]; }
);
EOF
}

status=0
run() { # NAME ARGS...
	local name=$1 t0
	shift
	conf "$name"
	rm -f "$O/$name.json.workers"
	t0=$(date +%s)
	timeout $((MINUTES * 60 + 300)) "$D/core/ntcore" -c "$O/$name.conf" -- \
		"$PY" "$HERE/anomaly_train.py" "$DATA" "$O/$name.json" "$@" > "$O/$name.out" 2>&1
	local rc=$?
	echo "## $name: ntcore exit $rc after $(( $(date +%s) - t0 )) s"
	grep -E "training step is|watching|steps, median|error|warning" "$O/$name.out" | head -20
	[ $rc = 0 ] || status=1
}

echo "### slow: loader slowed from batch $SLOW_AT"
run slow --steps "$STEPS" --slow-at "$SLOW_AT"
"$PY" "$HERE/anomaly_check.py" slow "$O/slow.jsonl" "$O/slow.json" || status=1

echo "### clean: $MINUTES min"
run clean --minutes "$MINUTES"
"$PY" "$HERE/anomaly_check.py" clean "$O/clean.jsonl" "$O/clean.json" || status=1

echo "### result: $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
