#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The file sink on a full disk (issue 18). A 4 MiB tmpfs (in a private
# mount namespace) is filled but for 64 KiB; a fixture probe publishes
# 200000 events in 1 s to a file sink flushing every 100 ms; half a second
# in, the filler is deleted, so writes fail, then succeed, then fail again
# as the disk fills up. Must hold:
#  - every line of the file is a whole JSON object and the file ends with a
#    newline (a write cut short leaves no partial line for later writes to
#    follow);
#  - events written + events counted as dropped = events published, exactly
#    (metric lines the full disk refused are not counted as events);
#  - the file is created 0600.
# usage: file_full.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
export NTCORE_PLUGIN_PATH=$NTCORE_PLUGIN_PATH:$B/tests
[ -f "$B/tests/fixture_gen.so" ] || fail "fixture not built ($B/tests/fixture_gen.so)"
command -v unshare >/dev/null || fail "unshare (util-linux) is needed"
nt_test_tmp nt-filefull

N=200000
mkdir "$T/disk"
cat >"$T/full.conf" <<C
plugins = (
  { plugin = "fixture_gen"; count = $N; batch = 2000; interval_ms = 10; },
  { plugin = "file"; path = "$T/disk/out.jsonl"; metrics = true;
    interval_ms = 100; buffer_kb = 64; }
);
C
# A private mount namespace; where the root is not a mount point (a chroot,
# as in scripts/fresh-root.sh) its propagation cannot be changed, so the
# tmpfs may show in the parent namespace too: it is unmounted at the end.
prop=private
unshare -m --propagation private true 2>/dev/null || prop=unchanged
unshare -m --propagation $prop sh -c '
	set -e
	mount -t tmpfs -o size=4m nt-full "$1/disk"
	trap "umount \"\$1/disk\" 2>/dev/null || umount -l \"\$1/disk\" 2>/dev/null || true" EXIT
	dd if=/dev/zero of="$1/disk/filler" bs=64k count=63 status=none
	(sleep 0.5; rm -f "$1/disk/filler") &
	rc=0
	"$2" -c "$1/full.conf" -d 2 >"$1/stdout" 2>"$1/stderr" || rc=$?
	cp "$1/disk/out.jsonl" "$1/out.jsonl"
	stat -c %a "$1/disk/out.jsonl" >"$1/mode"
	wait
	exit $rc
' sh "$T" "$NTCORE" || fail "ntcore exited $?: $(tail -5 "$T/stderr")"

python3 - "$T" "$N" <<'PY' || fail "see above"
import json, re, sys
T, N = sys.argv[1], int(sys.argv[2])
bad = []
mode = open(f"{T}/mode").read().strip()
if mode != "600":
    bad.append(f"the file was created {mode}, want 600")
data = open(f"{T}/out.jsonl", "rb").read()
if data and not data.endswith(b"\n"):
    bad.append("the file does not end with a newline")
written = 0
for i, line in enumerate(data.split(b"\n")[:-1]):
    try:
        e = json.loads(line)
    except ValueError:
        bad.append(f"line {i + 1} is not whole JSON: {line[:60]!r}...")
        break
    written += e.get("type") == "gen.seq"
rows = {}
for line in open(f"{T}/stderr"):
    m = re.match(r"\s+(\S+)\s+(probe|sink)\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)$", line)
    if m:
        rows[m[1]] = tuple(int(x) for x in m.group(3, 4, 5))
_, out, dropped = rows.get("file.0", (0, -1, -1))
if "writing" not in open(f"{T}/stderr").read():
    bad.append("no write failed: the disk was never full")
if written + dropped != N:
    bad.append(f"written {written} + dropped {dropped} != published {N}")
if not written or not dropped:
    bad.append(f"written {written}, dropped {dropped}: the test needs both")
for b in bad:
    print("  " + b)
if bad:
    sys.exit(1)
print(f"{written} events written + {dropped} counted as dropped = {N}; "
      f"{len(data)} bytes, whole lines only")
PY
echo "file_full.sh: ok"
