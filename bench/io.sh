#!/bin/bash
# bench/io.sh [--smoke] [BUILD_ROOT]
#
# Cost of the io probe on an I/O-heavy workload, measured side by side in one
# run (modes interleaved, median of the repetitions):
#   base        dd writing then reading a file in 4 KiB O_DIRECT blocks (every
#               block one request through the block layer), alone
#   ntcore      ntcore host-wide in the background (io probe with its default
#               config + the file sink with metrics), dd beside it
#   bpftrace    the bpftrace one-liner that does what biolatency does, on the
#               block tracepoints, host-wide:
#                 tracepoint:block:block_rq_issue
#                   { @start[args->dev, args->sector] = nsecs; }
#                 tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/
#                   { @usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000);
#                     delete(@start[args->dev, args->sector]); }
#   biolatency  biolatency-bpfcc from Debian's bpfcc-tools, when it can run
#               (it needs kernel headers; the reason is printed if not)
# It prints each mode's run time over base and the in-kernel cost of the
# programs per request (ns) from the kernel's BPF statistics
# (kernel.bpf_stats_enabled is set to 1 for the run and put back after).
# The file lives on a block device: $NTCORE_IO_TEST_DIR, or the first of
# BUILD_ROOT, /var/tmp, /root that is on one.
#
# --smoke: one short repetition (< 30 s); CI runs only this.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_bench_init io 26 "$@"

if [ "$SMOKE" -eq 1 ]; then
	MIB=8 REPS=1
else
	MIB=64 REPS=5
fi
BLOCKS=$((MIB * 256))
HAVE_BPFTRACE=1
command -v bpftrace >/dev/null || HAVE_BPFTRACE=0

on_blockdev() {
	python3 - "$1" <<'EOF'
import os, sys
st = os.stat(sys.argv[1])
dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
sys.exit(0 if os.major(st.st_dev) and os.path.exists("/sys/dev/block/" + dev) else 1)
EOF
}
DIR=
for d in ${NTCORE_IO_TEST_DIR:-} "$B" /var/tmp /root; do
	[ -d "$d" ] && [ -w "$d" ] || continue
	case $(stat -f -c %T "$d") in tmpfs | ramfs | overlayfs | nfs*) continue ;; esac
	if on_blockdev "$d"; then DIR=$d; break; fi
done
[ -n "$DIR" ] || fail "no writable directory on a block device; set NTCORE_IO_TEST_DIR"

bench_cleanup() { rm -f "${DATA:-}"; }
nt_bench_tmp
DATA=$(mktemp "$DIR/ntcore-bench-io.XXXXXX.dat")
nt_bench_stats_on || true

cat >"$T/io.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "io"; },
  { plugin = "file"; path = "$T/events.jsonl"; metrics = true; }
);
EOF
cat >"$T/io.bt" <<'EOF'
tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; }
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ {
	@usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000);
	delete(@start[args->dev, args->sector]);
}
EOF

BIOLAT_WHY=
if command -v biolatency-bpfcc >/dev/null; then
	if ! timeout 30 biolatency-bpfcc 1 1 >"$T/biolat.try" 2>&1; then
		BIOLAT_WHY=$(grep -m1 -E "rror|Unable|Exception|cannot" "$T/biolat.try" || tail -1 "$T/biolat.try")
	fi
else
	BIOLAT_WHY="biolatency-bpfcc not installed"
fi

# The workload: write then read BLOCKS 4 KiB blocks with O_DIRECT, timed.
workload() {
	local t0 t1
	t0=$(date +%s.%N)
	dd if=/dev/zero of="$DATA" bs=4k count="$BLOCKS" oflag=direct conv=notrunc status=none
	dd if="$DATA" of=/dev/null bs=4k count="$BLOCKS" iflag=direct status=none
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f\n", b - a}'
}
# Allocate the file once, outside the timed runs.
dd if=/dev/zero of="$DATA" bs=1M count="$MIB" status=none conv=fsync

run_mode() { # MODE -> seconds
	local mode=$1 t
	case $mode in
	base) ;;
	ntcore) start_bg "$T/ntcore.log" "tracing block requests" "$NTCORE" -c "$T/io.conf" ;;
	bpftrace) start_bg "$T/bpftrace.log" "Attaching" bpftrace "$T/io.bt" ;;
	biolatency) start_bg "$T/biolat.log" "Tracing block" biolatency-bpfcc ;;
	esac
	t=$(workload)
	case $mode in
	ntcore) record_cost ntcore '^io_(start|insert|issue|requeue|complete)$' ;;
	bpftrace) record_cost bpftrace '^block_rq_(issue|comple)' ;;
	esac
	[ "$mode" = base ] || stop_bg
	echo "$t"
}

MODES="base ntcore"
[ "$HAVE_BPFTRACE" -eq 1 ] && MODES="$MODES bpftrace"
[ -z "$BIOLAT_WHY" ] && MODES="$MODES biolatency"

echo "bench/io: dd 4 KiB O_DIRECT, $MIB MiB written then read ($((BLOCKS * 2)) requests) in $DIR, $REPS repetition(s), interleaved, median"
for r in $(seq "$REPS"); do
	for m in $MODES; do
		echo "$m $(run_mode "$m")" >>"$T/times"
	done
done
base=$(awk '$1=="base"{print $2}' "$T/times" | median)
printf "    %-10s %10s %8s %14s\n" mode time_s ratio "us/request+"
for m in $MODES; do
	t=$(awk -v m="$m" '$1==m{print $2}' "$T/times" | median)
	awk -v m="$m" -v t="$t" -v b="$base" -v n=$((BLOCKS * 2)) \
		'BEGIN {printf "    %-10s %10.3f %8.3f %14.2f\n", m, t, t / b, (t - b) * 1e6 / n}'
done
[ -n "$BIOLAT_WHY" ] && echo "  biolatency-bpfcc: not run: $BIOLAT_WHY"
if [ -n "$STATS_WAS" ] && [ -s "$COST" ]; then
	echo "  in-kernel cost of the programs (kernel.bpf_stats_enabled):"
	awk '{cnt[$1" "$2]+=$3; ns[$1" "$2]+=$4; tot[$1]+=$4}
	     END {for (k in cnt) if (cnt[k]) printf "    %-24s %10d runs %8.0f ns/run\n", k, cnt[k], ns[k]/cnt[k]}' "$COST" | sort
	# Per request: all of a tool's programs over the requests it saw issued
	# (host-wide: the workload's and whatever else ran on the machine).
	awk '{tot[$1]+=$4} $2 ~ /issue/ {req[$1]+=$3}
	     END {for (m in tot) if (req[m]) printf "    %-24s %8.0f ns per request (all its programs)\n", m, tot[m]/req[m]}' "$COST" | sort
fi
