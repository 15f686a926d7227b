#!/bin/bash
# Integration test of the io probe (root, real kernel, real disk).
#   tests/integration/io.sh BUILD_ROOT
# The test file must live on a block device (not tmpfs): it goes in
# $NTCORE_IO_TEST_DIR, or else the first of BUILD_ROOT, /var/tmp, /root that
# is on one; the device is found at run time from stat st_dev and
# /sys/dev/block.
# 1. A child writes exactly M MiB (M random) with O_DIRECT + fdatasync, another
#    reads them back with O_DIRECT: each is attributed exactly M MiB on the
#    file system's device (checked request by request against the file's
#    extents), with non-empty queue and service histograms.
# 2. devices = a missing device: a FILE:LINE message, that instance fails,
#    the others go on (one with the real device plus a missing one traces the
#    real one). A device filter on another disk sees none of it.
# 3. Config errors (mistyped key, malformed device, bad value): exit 2.
# 4. A target given with -p exits mid-run: a message, the run goes on.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_init io "$@"

# The block device under a directory, "MAJ:MIN", or nothing.
blockdev_of() {
	python3 - "$1" <<'EOF'
import os, sys
st = os.stat(sys.argv[1])
dev = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
if os.major(st.st_dev) != 0 and os.path.exists("/sys/dev/block/" + dev):
    print(dev)
EOF
}

DIR=
for d in ${NTCORE_IO_TEST_DIR:-} "$B" /var/tmp /root; do
	[ -d "$d" ] && [ -w "$d" ] || continue
	case $(stat -f -c %T "$d") in tmpfs | ramfs | overlayfs | fuseblk | nfs*) continue ;; esac
	if [ -n "$(blockdev_of "$d")" ]; then
		DIR=$d
		break
	fi
done
[ -n "$DIR" ] || fail "no writable directory on a block device (tried \$NTCORE_IO_TEST_DIR, $B, /var/tmp, /root); set NTCORE_IO_TEST_DIR"
DEV=$(blockdev_of "$DIR")
DEVNAME=$(sed -n 's/^DEVNAME=//p' "/sys/dev/block/$DEV/uevent")
[ -n "$DEVNAME" ] || DEVNAME=$DEV
echo "io.sh: test file in $DIR on $DEVNAME ($DEV, $(stat -f -c %T "$DIR"))"

test_cleanup() { rm -f "${DATA:-}"; }
nt_test_tmp ntcore-io-test
DATA=$(mktemp "$DIR/ntcore-io-test.XXXXXX.dat")

conf() { # conf NAME 'io instance(s)'
	cat >"$T/$1.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  $2,
  { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; }
);
EOF
}

run() { # run NAME MIB [ntcore args] -- must exit 0
	local name=$1 mib=$2
	shift 2
	timeout 90 "$NTCORE" -c "$T/$name.conf" "$@" -- \
		python3 "$HERE/io/dio.py" both "$DATA" "$mib" 1024 "$T/$name.json" \
		>"$T/$name.out" 2>&1 || { cat "$T/$name.out" >&2; fail "$name: ntcore exited with $?"; }
}

# --- 1: exact attribution ---------------------------------------------------
M=$(( 8 + RANDOM % 33 ))
conf exact '{ plugin = "io"; report_interval_s = 0; slow_threshold_ms = 0.0; request_events = true; }'
run exact "$M"
python3 "$HERE/io/check.py" "$T/exact.json" "$T/exact.jsonl" --events ||
	{ cat "$T/exact.out" >&2; fail "exact: attribution does not match the workload"; }
grep -q "\"device\":\"$DEVNAME\"" "$T/exact.jsonl" || fail "exact: no series labelled device=$DEVNAME"

# --- 2: devices that do not exist --------------------------------------------
M=$(( 4 + RANDOM % 8 ))
conf missing "{ plugin = \"io\"; name = \"io.bad\"; devices = [ \"nosuchdisk0\" ]; },
  { plugin = \"io\"; name = \"io.some\"; report_interval_s = 0;
    devices = [ \"nosuchdisk1\", \"$DEVNAME\" ]; }"
run missing "$M"
grep -Eq "$T/missing.conf:3: devices: no block device \"nosuchdisk0\" exists" "$T/missing.out" ||
	{ cat "$T/missing.out" >&2; fail "missing: no FILE:LINE message for nosuchdisk0"; }
grep -q "io.bad.*failed.*the other plugins go on" "$T/missing.out" ||
	{ cat "$T/missing.out" >&2; fail "missing: io.bad did not fail cleanly"; }
grep -q "io.some.*nosuchdisk1" "$T/missing.out" ||
	{ cat "$T/missing.out" >&2; fail "missing: no message for nosuchdisk1"; }
grep -q "io.some.*tracing block requests on $DEVNAME" "$T/missing.out" ||
	{ cat "$T/missing.out" >&2; fail "missing: io.some does not trace $DEVNAME"; }
python3 "$HERE/io/check.py" "$T/missing.json" "$T/missing.jsonl" ||
	{ cat "$T/missing.out" >&2; fail "missing: io.some lost the workload"; }
echo "io.sh: missing: $(grep -m1 nosuchdisk0 "$T/missing.out")"

OTHER=
for d in /sys/class/block/*; do
	n=$(basename "$d")
	[ -e "$d/dev" ] || continue
	case $n in "$DEVNAME"* | dm-* | md*) continue ;; esac
	[ -e "/sys/class/block/$DEVNAME/holders/$n" ] && continue
	OTHER=$n
	break
done
if [ -n "$OTHER" ]; then
	conf other "{ plugin = \"io\"; report_interval_s = 0; devices = [ \"$OTHER\" ]; }"
	run other 2
	if grep '"ntcore_io_process_bytes_total"' "$T/other.jsonl" | grep -q "\"device\":\"$DEVNAME\""; then
		fail "other: a filter on $OTHER counted requests on $DEVNAME"
	fi
	echo "io.sh: other: a filter on $OTHER saw no $DEVNAME requests"
else
	echo "io.sh: other: no second block device here, filter exclusion not exercised"
fi

# --- 3: config errors --------------------------------------------------------
expect_config_error mistyped '{ plugin = "io"; device = [ "vda" ]; }' "unknown key 'device'"
expect_config_error bad_spec '{ plugin = "io"; devices = [ "sda/1" ]; }' 'devices: "sda/1" is not a block device name'
expect_config_error bad_majmin '{ plugin = "io"; devices = [ "8:x" ]; }' 'devices: "8:x"'
expect_config_error negative '{ plugin = "io"; slow_threshold_ms = -1.0; }' 'slow_threshold_ms'

# --- 4: a -p target that exits mid-run --------------------------------------
M=$(( 4 + RANDOM % 8 ))
conf pexit '{ plugin = "io"; report_interval_s = 0; }'
expect_pexit "tracing block requests" 6 \
	python3 "$HERE/io/dio.py" both "$DATA" "$M" 1024 "$T/pexit.json" --gate "$T/gate"
python3 "$HERE/io/check.py" "$T/pexit.json" "$T/pexit.jsonl" ||
	{ cat "$T/pexit.out" >&2; fail "pexit: the exited target's I/O is not in the output"; }
echo "io.sh: pexit: $(grep "target pid $XPID" "$T/pexit.out")"

echo "io.sh: PASS"
