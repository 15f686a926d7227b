#!/bin/bash
# Integration test of the python probe (root, real kernel) with Debian's
# CPython 3.11 (/usr/bin/python3.11, built with USDT markers):
#   1. sampling: main() -> a() -> b() -> c() burns CPU for 3 s while a
#      second thread sleeps in d(): >= 90 % of the main thread's samples
#      are that exact stack with the right files and lines, >= 90 % of the
#      sleeper's end in d() (off-CPU); the folded file (file sink, format
#      folded) is flame-graph input; python.report has the table.
#   2. call tracing (USDT): f() called exactly N times is counted N times;
#      a function outside the pattern is not reported; self <= inclusive.
#   3. exceptions: 5 ValueError raised in boom(), 3 KeyError raised by
#      dict inside lookup(), by type and line.
# Usage: python.sh BUILD_ROOT
set -euo pipefail

B=${1:?usage: python.sh BUILD_ROOT}
NTCORE=$B/core/ntcore
PY=/usr/bin/python3.11
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$PY $HERE/python/check.py"
fail() { echo "FAIL python: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (loads BPF)"
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (build first)"
[ -f "$B/plugins/python/python.so" ] || fail "no $B/plugins/python/python.so"
[ -x "$PY" ] || fail "Debian's $PY is needed (apt-get install python3.11)"
readelf -n "$PY" | grep -q function__entry ||
	fail "$PY has no python:function__entry USDT note (not Debian's build?)"
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks

T=$(mktemp -d /tmp/ntcore-python.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$HERE"/python/*.py "$T/"

# run CONF_KEYS OUT -- CMD...
run() {
	local keys=$1 out=$2
	shift 3
	cat >"$T/py.conf" <<CONF
plugins = (
  { plugin = "python"; required = true; $keys },
  { plugin = "file"; name = "file.json"; path = "$out.jsonl"; },
  { plugin = "file"; name = "file.folded"; path = "$out.folded"; format = "folded"; events = [ "python.stack" ]; }
);
CONF
	local rc=0
	timeout 60 "$NTCORE" -c "$T/py.conf" -- "$@" >"$out.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		cat "$out.log" >&2
		fail "ntcore exited with $rc running: $*"
	fi
	if grep -E "error|failed" "$out.log" | grep -v "exited with status" >&2; then
		fail "errors in the log of: $*"
	fi
}

echo "1. sampling ($PY)"
run "" "$T/abc" -- "$PY" "$T/abc.py" 3
$CHECK abc "$T/abc.jsonl" "$T/abc.py" 3.11 3
$CHECK folded "$T/abc.folded" "$T/abc.py"

echo "2. call tracing (USDT)"
run 'calls = true; call_pattern = "[fmh]*"; idle = false;' "$T/calls" -- "$PY" "$T/calls.py" 12345
$CHECK calls "$T/calls.jsonl" "$T/calls.py" 12345

echo "3. exceptions"
run 'exceptions = true;' "$T/exc" -- "$PY" "$T/exc.py"
$CHECK exc "$T/exc.jsonl" "$T/exc.py" || { grep -E "python.exception" "$T/exc.jsonl" | grep -E "count.:5|exc.py" | cut -c1-400 >&2; exit 1; }
echo "PASS python"
