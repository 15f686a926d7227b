#!/bin/bash
# SPDX-License-Identifier: MIT
# Host-wide, the python probe samples only ntcore's own user's CPython
# processes unless other_users = true: a loop run as root and the same loop
# run as nobody; by default only root's gets python.stack samples (and a
# python.process line), with other_users = true both do.
# Usage: python_users.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init python "${1:-}"
nt_test_tmp nt-pyusers
chmod 0755 "$T"
PY=/usr/bin/python3
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed"
cat >"$T/loop.py" <<'P'
import time
def burn_for_users_test():
    end = time.time() + 60
    while time.time() < end:
        sum(range(1000))
burn_for_users_test()
P
chmod 0644 "$T/loop.py"
pids=()
test_cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
$PY "$T/loop.py" & mine=$!
setpriv --reuid=65534 --regid=65534 --clear-groups $PY "$T/loop.py" & theirs=$!
pids=($mine $theirs)

# run NAME KEYS: host-wide for 4 s, events in $T/NAME.jsonl
run() {
	printf 'plugins = (\n  { plugin = "python"; %s },\n  { plugin = "file"; path = "%s"; events = [ "python.*" ]; }\n);\n' \
		"$2" "$T/$1.jsonl" >"$T/$1.conf"
	local rc=0
	"$NTCORE" -c "$T/$1.conf" -d 4 >"$T/$1.log" 2>&1 || rc=$?
	[ $rc = 0 ] || fail "$1: ntcore exited $rc: $(tail -5 "$T/$1.log")"
}
# count NAME PID: python.stack events of PID
count() {
	python3 - "$T/$1.jsonl" "$2" <<'P'
import json, sys
n = sum(1 for l in open(sys.argv[1])
        if (e := json.loads(l))["type"] == "python.stack" and e["pid"] == int(sys.argv[2])
        and "burn_for_users_test" in e.get("stack", ""))
print(n)
P
}

run default ""
m=$(count default $mine); o=$(count default $theirs)
[ "$m" -gt 0 ] || fail "default: root's loop got no samples: $(tail -5 "$T/default.log")"
[ "$o" = 0 ] || fail "default: nobody's loop got $o samples"
grep -q "host-wide: sampling the processes of uid 0 only" "$T/default.log" ||
	fail "default: no line saying whose processes are sampled: $(head -5 "$T/default.log")"
grep -q "\"pid\":$theirs" "$T/default.jsonl" && fail "default: an event names nobody's process"
echo "ok   - default: root's loop $m python.stack events, nobody's none"

run all "other_users = true;"
m=$(count all $mine); o=$(count all $theirs)
[ "$m" -gt 0 ] && [ "$o" -gt 0 ] || fail "other_users = true: root's $m, nobody's $o samples"
echo "ok   - other_users = true: root's loop $m, nobody's $o python.stack events"
