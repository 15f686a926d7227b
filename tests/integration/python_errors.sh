#!/bin/bash
# Integration test of the python probe's refusals (root, real kernel): each
# case must give a clear message (log and python.process event), no crash,
# and the run goes on (ntcore exits 0, the file sink still gets proc.exit).
#   1. an unknown CPython version: a copy of Debian's python3.11 whose
#      Py_Version says 3.14 is refused ("not a version this probe knows");
#   2. a process that is not Python: `-- sleep 2` and `-p PID` of a sleep;
#   3. an interpreter built without USDT markers (the copy with its
#      .note.stapsdt removed) with calls = true: sampling goes on, call
#      tracing is refused with a message;
#   4. processes that exit mid-sample: 12 Python processes at 997 Hz, half
#      killed with SIGKILL while sampled, half exiting on their own.
# Usage: python_errors.sh BUILD_ROOT
set -euo pipefail

B=${1:?usage: python_errors.sh BUILD_ROOT}
NTCORE=$B/core/ntcore
PY=/usr/bin/python3.11
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$PY $HERE/python/check.py"
fail() { echo "FAIL python_errors: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (loads BPF)"
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (build first)"
[ -x "$PY" ] || fail "Debian's $PY is needed"
command -v objcopy >/dev/null || fail "objcopy (binutils) is needed"
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks

T=$(mktemp -d /tmp/ntcore-pyerr.XXXXXX)
BG=
trap '[ -n "$BG" ] && kill $BG 2>/dev/null; rm -rf "$T"' EXIT
cp "$HERE"/python/*.py "$T/"

conf() {
	cat >"$T/py.conf" <<CONF
plugins = (
  { plugin = "python"; $1 },
  { plugin = "file"; path = "$2"; }
);
CONF
}

# expect0 LOG ARGS...: ntcore must exit 0 and not crash
expect0() {
	local log=$1 rc=0
	shift
	timeout 60 "$NTCORE" -c "$T/py.conf" "$@" >"$log" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || { cat "$log" >&2; fail "ntcore exited with $rc: $*"; }
	! grep -qiE "segmentation|core dumped|abort" "$log" || { cat "$log" >&2; fail "crash: $*"; }
}

echo "1. unknown version"
$PY "$T/patch_version.py" "$PY" "$T/python3.14" 0x030e00f0
chmod +x "$T/python3.14"
conf "" "$T/v.jsonl"
expect0 "$T/v.log" -- "$T/python3.14" "$T/abc.py" 1
grep -q "is not a version this probe knows" "$T/v.log" || { cat "$T/v.log" >&2; fail "no clear message for 3.14"; }
$CHECK refused "$T/v.jsonl" EOPNOTSUPP "CPython 3.14 (Py_Version 0x030e00f0)"

echo "2. not a Python process"
conf "" "$T/n.jsonl"
expect0 "$T/n.log" -- sleep 2
$CHECK refused "$T/n.jsonl" ENOENT "is not a CPython process"
sleep 3 &
BG=$!
conf "" "$T/p.jsonl"
expect0 "$T/p.log" -p "$BG" -d 1
grep -q "pid $BG is not a CPython process" "$T/p.log" || { cat "$T/p.log" >&2; fail "no message for -p $BG"; }
kill "$BG" 2>/dev/null || true
wait "$BG" 2>/dev/null || true
BG=

echo "3. no USDT markers"
objcopy --remove-section .note.stapsdt "$PY" "$T/python3.11"
! readelf -n "$T/python3.11" | grep -q function__entry || fail "objcopy left the USDT notes"
conf "calls = true;" "$T/u.jsonl"
expect0 "$T/u.log" -- "$T/python3.11" "$T/abc.py" 1
grep -q "built without USDT markers" "$T/u.log" || { cat "$T/u.log" >&2; fail "no clear message for missing USDT"; }
$CHECK refused "$T/u.jsonl" EOPNOTSUPP "built without USDT markers"
$CHECK refused "$T/u.jsonl" OK "sampling at"

echo "4. processes exiting mid-sample"
cat >"$T/many.sh" <<SH
#!/bin/bash
pids=()
for i in \$(seq 12); do
	$PY -c "
import time, sys
def spin(end):
    while time.monotonic() < end: pass
spin(time.monotonic() + 0.2 + 0.05 * (\$i % 5))
" &
	pids+=(\$!)
done
sleep 0.25
for i in 0 2 4 6 8 10; do kill -9 \${pids[\$i]} 2>/dev/null || true; done
wait || true
SH
chmod +x "$T/many.sh"
conf "frequency = 997; exceptions = true;" "$T/m.jsonl"
expect0 "$T/m.log" -- "$T/many.sh"
$PY - "$T/m.jsonl" <<'PYCHECK'
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
exits = [e for e in evs if e["type"] == "proc.exit"]
ok = {e["subject_pid"] for e in evs if e["type"] == "python.process" and e["status"] == "OK"}
stacks = {e["pid"] for e in evs if e["type"] == "python.stack"}
if len(exits) < 13:
    sys.exit("FAIL python_errors: %d proc.exit events, want 13" % len(exits))
if len(ok) < 3 or len(stacks) < 3:
    sys.exit("FAIL python_errors: %d processes attached, %d with stacks" % (len(ok), len(stacks)))
print("ok: %d processes exited (6 killed), %d attached, %d with stacks" % (len(exits), len(ok), len(stacks)))
PYCHECK
n=$(grep -c "exited: .* samples kept" "$T/m.log" || true)
[ "$n" -ge 3 ] || { cat "$T/m.log" >&2; fail "no exit messages"; }
grep "exited: " "$T/m.log" | head -2
echo "PASS python_errors"
