#!/bin/bash
# Integration test of the anomaly detector with real probes (root, real
# kernel, real disk and loopback network). Each workload
# (tests/integration/anomaly/work.py) runs steady, then changes at a moment
# it records; the detector must raise the right alert with the right reason
# after the change and none before it; the same workloads without the
# change raise none.
#   1. io probe: O_DIRECT reads go from 1 MiB to 4 KiB requests: the
#      small_io rule ("mostly-small I/O: <device> read small requests N %")
#   2. net probe: a loopback connection goes from 200 KB/s (9 s: the rule
#      needs 30 values of history) to as fast as it
#      goes: net_burst ("network burst: python3 network ...")
#   3. python probe (USDT calls of train_step) + io probe: from step 260 the
#      step (80 ms and 8 MiB of reads) reads its data in 4 KiB requests: a
#      step alert naming the process's reads as what moved, within 20 steps
#      (python.calls comes in 1 s batches, of 10 steps, timed over two; the
#      GPU test's launch-based steps must do it in 3)
#   3b. cuda probe (launch events, on its fixture runtime: no GPU) + io
#      probe: the GPU test's loop in C (tests/integration/anomaly/loop.c):
#      steps found from the repeating kernel sequence (15 launches), a loader process
#      ("pt_data_worker") reads each step's data in 4 KiB requests from step
#      300: the step alert within 3 steps, naming the data-loader's reads
#   4. quiet: the workloads steady (io, net and Python steps one after the
#      other under one config, then the loop under its own):
#      no alert.anomaly.
# The loop's steps must be 2x slower to count (step_min_slowdown = 1.0):
# 25-30 ms steps on this shared 2-CPU machine (other jobs build on it) took
# up to 63 % longer now and then; the slowed ones take 3-6x. And the risk
# per step is 1e-3 (default 1e-4): 50 warm-up steps with such hiccups fit
# a heavy tail, whose 1e-4 quantile sometimes sat above a 3.75x step.
# In every run an alert within 3 s of a request the disk itself took
# >= 200 ms for (io.slow) is tolerated and printed: this VM's disk is
# shared, and such a stall is a real anomaly (a 0.45 s step was one); so
# is a step alert just after a step the workload itself timed at twice its
# median or more. No cooldown, so that such an alert does not hide
# the change that follows.
#   5. config errors exit 2 with FILE:LINE
#   tests/integration/anomaly.sh BUILD_ROOT
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_init anomaly "$@"
for p in io net python cuda; do
	[ -f "$B/plugins/$p/$p.so" ] || fail "$p plugin not built in $B"
done
[ -f "$B/plugins/cuda/libcudart.so.13" ] || fail "no fixture runtime $B/plugins/cuda/libcudart.so.13"
command -v cc >/dev/null || fail "needs a C compiler (cc) for the loop workload"
unset LD_LIBRARY_PATH
PY=/usr/bin/python3.11
[ -x "$PY" ] || fail "Debian's $PY is needed (USDT markers for python.calls)"

blockdev_of() {
	python3 - "$1" <<'PYEOF'
import os, sys
st = os.stat(sys.argv[1])
dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
if os.major(st.st_dev) != 0 and os.path.exists("/sys/dev/block/" + dev):
    print(dev)
PYEOF
}
DIR=
for d in ${NTCORE_IO_TEST_DIR:-} "$B" /var/tmp /root; do
	[ -d "$d" ] && [ -w "$d" ] || continue
	case $(stat -f -c %T "$d") in tmpfs | ramfs | overlayfs | fuseblk | nfs*) continue ;; esac
	if [ -n "$(blockdev_of "$d")" ]; then DIR=$d; break; fi
done
[ -n "$DIR" ] || fail "no writable directory on a block device; set NTCORE_IO_TEST_DIR"
DEV=$(blockdev_of "$DIR")
DEVNAME=$(sed -n 's/^DEVNAME=//p' "/sys/dev/block/$DEV/uevent")
# a partition's requests are counted on it, a whole disk's on the disk
echo "anomaly.sh: data in $DIR on ${DEVNAME:-$DEV}"

test_cleanup() { rm -f "${DATA:-}"; }
nt_test_tmp ntcore-anomaly-test
DATA=$(mktemp "$DIR/ntcore-anomaly.XXXXXX.dat")
dd if=/dev/zero of="$DATA" bs=1M count=64 oflag=direct status=none
# The GPU test's loop against the cuda probe's fixture runtime (its
# declarations: no CUDA toolkit needed); -rdynamic names the kernels.
LOOP=$T/anomaly_loop
cc -O1 -Wall -Werror -fno-omit-frame-pointer -rdynamic -I"$HERE/../fixtures/cuda" \
	-o "$LOOP" "$HERE/anomaly/loop.c" -L"$B/plugins/cuda" -l:libcudart.so.13 \
	-Wl,-rpath,"$B/plugins/cuda" || fail "cannot build the loop workload"
WORK="$PY $HERE/anomaly/work.py"
CHECK="python3 $HERE/anomaly/check.py"

conf() { # conf NAME 'probe instances' 'anomaly keys'
	cat >"$T/$1.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  $2,
  { plugin = "anomaly"; interval_ms = 100; cooldown_s = 0; $3 },
  { plugin = "file"; path = "$T/$1.jsonl"; events = [ "alert.*", "io.slow" ]; }
);
EOF
}

run() { # run NAME CMD...: ntcore -c NAME.conf -- CMD, must exit 0
	local name=$1
	shift
	timeout 120 "$NTCORE" -c "$T/$name.conf" -- "$@" >"$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out" >&2; fail "$name: ntcore exited with $?"; }
	grep -q "anomaly.0.*watching" "$T/$name.out" ||
		{ cat "$T/$name.out" >&2; fail "$name: the detector did not start"; }
}

# 4 KiB requests are small from 16 KiB down (io's default: under 4096);
# io.slow marks the disk's own stalls (this VM's disk is shared)
IO='{ plugin = "io"; interval_ms = 100; report_interval_s = 0; small_bytes = 16384;
    slow_threshold_ms = 200.0; }'
NET='{ plugin = "net"; interval_ms = 100; report_interval_s = 0; }'
PYP='{ plugin = "python"; calls = true; call_pattern = "train_step"; idle = false;
    frequency = 19; cuda_join = false; report_interval_s = 1; }'
CUDA='{ plugin = "cuda"; launch_events = true; }'
# The loop's 30 ms steps here must be 2x slower to count: see the top; that
# asks more than the default window (the last 8 steps 1.5x slower on
# average), which would wait for a second 3x step: the step alone counts
LOOPSTEPS='step_min_slowdown = 1.0; step_q = 1e-3; step_window = 1;'
# Python steps come in 1 s batches (python.calls each report_interval_s),
# which average the jitter out: 50 % slower counts there; 20 batches warm up.
STEPS='step_function = "train_step"; step_min_slowdown = 0.5; step_q = 1e-3; step_n_init = 20;'

# --- 1: mostly-small I/O ------------------------------------------------------
conf io "$IO" ""
run io $WORK io "$DATA" 4 4 "$T/io.json"
$CHECK change "$T/io.jsonl" "$T/io.json" rule \
	"^mostly-small I/O: ${DEVNAME:-.*} read small requests [0-9]+ % \(limit 80 %\)$" 3 ||
	fail "io: no mostly-small I/O alert after the switch to 4 KiB reads"

# --- 2: a network burst ---------------------------------------------------------
conf net "$NET" ""
run net $WORK net 9 2 "$T/net.json"
$CHECK change "$T/net.jsonl" "$T/net.json" rule \
	"^network burst: python3[.0-9]* network (send|receive) [0-9.]+ [KMG]iB/s, x[0-9.]+ its average" 2 ||
	fail "net: no network burst alert"

# --- 3: a slow training step and its reason -------------------------------------
conf steps "$PYP, $IO" "$STEPS"
run steps $WORK steps "$DATA" 300 260 "$T/steps.json"
grep -q "call tracing is off" "$T/steps.out" &&
	{ cat "$T/steps.out" >&2; fail "steps: no USDT call tracing in $PY"; }
$CHECK step "$T/steps.jsonl" "$T/steps.json" \
	"^step [0-9,]+: [0-9]+ % slower .*; python3[.0-9]* read (requests|latency|throughput|queue time) x[0-9.]+ at the same time" 20 ||
	fail "steps: no slow-step alert naming the reads"

# --- 3b: the same with kernel launches: steps from the launch pattern ---------
conf loop "$CUDA, $IO" "$LOOPSTEPS"
run loop "$LOOP" "$DATA" 360 300 "$T/loop.json"
grep -q "a training step is 15 kernel launches" "$T/loop.out" ||
	{ cat "$T/loop.out" >&2; fail "loop: the step's launch pattern (15 launches) was not found"; }
$CHECK step "$T/loop.jsonl" "$T/loop.json" \
	"^step [0-9,]+: [0-9]+ % slower .*; data-loader read (requests|latency|throughput|queue time) x[0-9.]+ at the same time" 3 ||
	fail "loop: no slow-step alert naming the data-loader's reads within 3 steps"

# --- 4: the same, steady: quiet -------------------------------------------------
conf quiet "$IO, $NET, $PYP" "$STEPS"
cat >"$T/quiet.sh" <<EOF
set -e
$WORK io "$DATA" 4 4 "$T/q-io.json" --steady
$WORK net 9 2 "$T/q-net.json" --steady
$WORK steps "$DATA" 300 260 "$T/q-steps.json" --steady
EOF
run quiet sh "$T/quiet.sh"
$CHECK none "$T/quiet.jsonl" "$T/q-steps.json" || fail "quiet: alerts on steady workloads"
conf quiet_loop "$CUDA, $IO" "$LOOPSTEPS"
run quiet_loop "$LOOP" "$DATA" 360 1000000 "$T/q-loop.json"
$CHECK none "$T/quiet_loop.jsonl" "$T/q-loop.json" || fail "quiet_loop: alerts on the steady loop"

# --- 5: config errors -----------------------------------------------------------
conf() { # NAME 'anomaly instance' (on line 3, as expect_config_error wants)
	printf 'ntcore = { log_level = "info"; };\nplugins = (\n  %s\n);\n' "$2" >"$T/$1.conf"
}
expect_config_error unknown '{ plugin = "anomaly"; windows = 3; }' "unknown key 'windows'"
expect_config_error small_init '{ plugin = "anomaly"; depth = 20; n_init = 25; }' 'n_init: must be at least depth \+ 10 \(30\)'
expect_config_error bad_rule '{ plugin = "anomaly"; rules = ( { name = "r"; test = "share"; metric = "ntcore_a_total"; threshold = 1.0; } ); }' 'share needs over'
expect_config_error bad_dir '{ plugin = "anomaly"; watch = ( { metrics = [ "x" ]; direction = "sideways"; } ); }' 'direction'

echo "anomaly.sh: PASS"
