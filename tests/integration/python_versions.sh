#!/bin/bash
# Integration test of the python probe on CPython 3.10, 3.12 and 3.13 (the
# layouts Debian's 3.11 does not exercise): the a() -> b() -> c() workload
# of python.sh under each interpreter found at the usual places (pyenv,
# /usr/bin, /usr/local/bin); 3.13 exercises _Py_DebugOffsets. Exits 77
# (skipped, shown as SKIP by meson) naming what it looked for when none is
# installed; fails on any interpreter it finds and cannot profile.
# Usage: python_versions.sh BUILD_ROOT
set -euo pipefail

B=${1:?usage: python_versions.sh BUILD_ROOT}
NTCORE=$B/core/ntcore
PY=/usr/bin/python3.11
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$PY $HERE/python/check.py"
fail() { echo "FAIL python_versions: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (loads BPF)"
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (build first)"
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks

found=()
for v in 3.10 3.12 3.13; do
	for c in /usr/bin/python$v /usr/local/bin/python$v \
		 "${PYENV_ROOT:-/root/.pyenv}"/versions/$v*/bin/python$v; do
		if [ -x "$c" ]; then
			found+=("$v:$c")
			break
		fi
	done
done
if [ ${#found[@]} -eq 0 ]; then
	echo "SKIP python_versions: no CPython 3.10, 3.12 or 3.13 in /usr/bin, /usr/local/bin or pyenv"
	exit 77
fi

T=$(mktemp -d /tmp/ntcore-pyver.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$HERE"/python/*.py "$T/"
for f in "${found[@]}"; do
	v=${f%%:*} exe=${f#*:}
	echo "== $v ($exe)"
	cat >"$T/py.conf" <<CONF
plugins = (
  { plugin = "python"; required = true; },
  { plugin = "file"; path = "$T/$v.jsonl"; }
);
CONF
	rc=0
	timeout 60 "$NTCORE" -c "$T/py.conf" -- "$exe" "$T/abc.py" 3 >"$T/$v.log" 2>&1 || rc=$?
	[ "$rc" -eq 0 ] || { cat "$T/$v.log" >&2; fail "ntcore exited with $rc under $exe"; }
	$CHECK abc "$T/$v.jsonl" "$T/abc.py" "$v" 3
done
echo "PASS python_versions (${#found[@]} interpreters)"
