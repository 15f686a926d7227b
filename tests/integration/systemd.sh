#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ntcore as a systemd service (dist/ntcore.service):
#  1. the notify protocol on a fake NOTIFY_SOCKET: READY=1 only once every
#     plugin is attached, WATCHDOG=1 from the loop at half WATCHDOG_USEC
#     (none when WATCHDOG_PID names another process), RELOADING=1 then
#     READY=1 around SIGHUP, STOPPING=1 last;
#  2. journald priorities: with stderr the stream JOURNAL_STREAM names,
#     lines carry <3> (errors, config errors), <4>, <6>; otherwise none;
#  3. the unit scores <= 2.5 in `systemd-analyze security` (offline);
#  4. the unit's capabilities (parsed from it) are enough for
#     training.conf's CPU plugins as an unprivileged user (setpriv), and each
#     one is needed: without it the named probe fails or reads nothing;
#  5. where systemd runs (PID 1), the unit itself starts, reloads, stops.
# Usage: systemd.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
nt_test_tmp nt-systemd
chmod 0755 "$T"
SRC=$(cd "$HERE/../.." && pwd)
UNIT=$B/dist/ntcore.service
[ -f "$UNIT" ] || fail "no $UNIT (build first)"
pids=()
test_cleanup() { kill "${pids[@]}" 2>/dev/null || true; }

# ---- 1. notify protocol ------------------------------------------------
cat >"$T/recv.py" <<'PY'
import json, os, socket, sys, time
path, out, log = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
s.settimeout(20)
open(path + ".up", "w").close()
msgs = []
while True:
    try:
        data = s.recv(4096).decode()
    except socket.timeout:
        break
    # what had the daemon logged when this message came?
    msgs.append({"t": time.monotonic(), "msg": data, "log": open(log).read()})
    if "STOPPING=1" in data:
        break
json.dump(msgs, open(out, "w"))
PY
printf 'plugins = (\n  { plugin = "sched"; },\n  { plugin = "file"; path = "%s"; }\n);\n' \
	"$T/n.jsonl" >"$T/n.conf"
# notify NAME [WATCHDOG_PID]: one run; messages in $T/NAME.json
notify() {
	: >"$T/$1.log"
	python3 "$T/recv.py" "$T/$1.sock" "$T/$1.json" "$T/$1.log" & local rp=$!
	pids+=($rp)
	for _ in $(seq 50); do [ -e "$T/$1.sock.up" ] && break; sleep 0.1; done
	env NOTIFY_SOCKET="$T/$1.sock" WATCHDOG_USEC=400000 ${2:+WATCHDOG_PID=$2} \
		"$NTCORE" -c "$T/n.conf" -d 4 2>>"$T/$1.log" & local np=$!
	pids+=($np)
	for _ in $(seq 100); do grep -q "sched.0\] attached" "$T/$1.log" && break; sleep 0.1; done
	sleep 1
	kill -HUP $np
	wait $np || fail "$1: ntcore exited $?: $(tail -5 "$T/$1.log")"
	wait $rp || fail "$1: the receiver failed"
}
notify own "" # WATCHDOG_PID unset: the watchdog is for whoever reads it
python3 - "$T/own.json" <<'PY' || fail "notify protocol: see above"
import json, sys
m = json.load(open(sys.argv[1]))
kinds = [x["msg"].split("\n")[0] for x in m]
assert kinds[0] == "READY=1", kinds[:3]
first = m[0]["log"]
assert "[probe:sched.0] attached" in first, first  # sinks attach before probes
assert "attach failed" not in first
dogs = sum(k == "WATCHDOG=1" for k in kinds)
assert dogs >= 8, f"{dogs} WATCHDOG=1 in 4 s at a 0.2 s period"
r = kinds.index("RELOADING=1")
assert "READY=1" in kinds[r + 1:], kinds
assert kinds[-1] == "STOPPING=1", kinds[-3:]
print(f"ok   - notify: READY=1 after every attach, {dogs} WATCHDOG=1 in 4 s, "
      f"RELOADING=1/READY=1 on SIGHUP, STOPPING=1 last")
PY
notify other 1
python3 - "$T/other.json" <<'PY' || fail "watchdog for another pid: see above"
import json, sys
kinds = [x["msg"].split("\n")[0] for x in json.load(open(sys.argv[1]))]
assert "WATCHDOG=1" not in kinds and kinds[0] == "READY=1", kinds
print("ok   - notify: no WATCHDOG=1 when WATCHDOG_PID names another process")
PY

# ---- 2. journald priorities --------------------------------------------
printf 'plugins = (\n  { plugin = "sched"; },\n  { plugin = "file"; name = "broken"; path = "/nonexistent/x.jsonl"; }\n);\n' \
	>"$T/j.conf"
: >"$T/j.err"
JOURNAL_STREAM=$(stat -c %d:%i "$T/j.err") "$NTCORE" -c "$T/j.conf" -d 1 2>>"$T/j.err" >/dev/null ||
	fail "journal run: $(tail -5 "$T/j.err")"
grep -q '^<3>ntcore: error: \[sink:broken\] attach failed' "$T/j.err" ||
	fail "no <3> on the attach error: $(head -5 "$T/j.err")"
grep -q '^<6>ntcore: \[probe:sched.0\] attached' "$T/j.err" ||
	fail "no <6> on an info line: $(head -5 "$T/j.err")"
printf 'plugins = ( { plugin = "sched"; bogus = 1; } );\n' >"$T/jbad.conf"
: >"$T/jbad.err"
rc=0
JOURNAL_STREAM=$(stat -c %d:%i "$T/jbad.err") "$NTCORE" -c "$T/jbad.conf" --check 2>>"$T/jbad.err" || rc=$?
[ $rc = 2 ] && grep -q "^<3>$T/jbad.conf:1: \[sched.0\] unknown key 'bogus'" "$T/jbad.err" ||
	fail "config error without <3>: $(cat "$T/jbad.err")"
"$NTCORE" -c "$T/j.conf" -d 1 2>"$T/plain.err" >/dev/null
JOURNAL_STREAM=$(stat -c %d:%i "$T/j.err") "$NTCORE" -c "$T/j.conf" -d 1 2>"$T/other.err" >/dev/null
if grep -q '^<[0-9]>' "$T/plain.err" "$T/other.err"; then
	fail "priorities on a stderr that is not the journal's stream"
fi
echo "ok   - journal: <3> errors and config errors, <6> info, none off the journal stream"

# ---- 3. systemd-analyze security ----------------------------------------
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (Debian package systemd)"
systemd-analyze security --offline=true "$UNIT" >"$T/sec.txt" 2>&1 ||
	fail "systemd-analyze: $(tail -5 "$T/sec.txt")"
score=$(sed -n 's/.*Overall exposure level for ntcore.service: \([0-9.]*\).*/\1/p' "$T/sec.txt")
[ -n "$score" ] || fail "no score: $(tail -3 "$T/sec.txt")"
python3 -c "import sys; sys.exit(0 if float('$score') <= 2.5 else 1)" ||
	fail "systemd-analyze security scores $score (> 2.5): $(grep '✗' "$T/sec.txt")"
echo "ok   - systemd-analyze security: $score"

# ---- 4. the unit's capabilities ------------------------------------------
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed"
caps=$(sed -n 's/^AmbientCapabilities=//p' "$UNIT")
[ "$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT")" = "$caps" ] ||
	fail "the bounding set differs from the ambient set"
grep -v 'plugin = "cuda' "$SRC/conf.d/training.conf" >"$T/cpu.conf"
printf 'plugins = (\n  { plugin = "python"; other_users = true; },\n  { plugin = "file"; path = "py.jsonl"; events = [ "python.*" ]; }\n);\n' \
	>"$T/py.conf"
chmod 0644 "$T/cpu.conf" "$T/py.conf"
mkdir "$T/state" && chown 65534:65534 "$T/state"
cat >"$T/loop.py" <<'P'
import time
def root_loop_for_caps_test():
    end = time.time() + 120
    while time.time() < end:
        sum(range(1000))
root_loop_for_caps_test()
P
/usr/bin/python3 "$T/loop.py" & pids+=($!)
# as_service CAPS CONF NAME [RC]: as nobody with exactly CAPS (the unit's
# spelling), in a state directory of its own, like DynamicUser=yes; the
# exit status must be RC (0).
as_service() {
	local set rc=0
	set=$(echo "$1" | tr ' ' '\n' | sed -n 's/^CAP_\(.*\)/+\L\1/p' | paste -sd,)
	(cd "$T/state" && setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs \
		--inh-caps="$set" --ambient-caps="$set" --bounding-set=-all,"$set" \
		"$NTCORE" -c "$2" -d 3 >"$T/$3.out" 2>&1) || rc=$?
	[ $rc = "${4:-0}" ] || fail "$3: exit $rc, want ${4:-0}: $(tail -5 "$T/$3.out")"
}
state_of() { awk -v n="$1" '$1 == n { s = $3 } END { print s }' "$T/$2.out"; }
as_service "$caps" "$T/cpu.conf" all
for p in sched.0 mem.0 io.0 net.0 python.0; do
	[ "$(state_of $p all)" = detached ] || fail "$p did not attach with the unit's capabilities: $(grep -E "error|$p" "$T/all.out" | head -5)"
done
grep -q "attach failed" "$T/all.out" && fail "an attach failed: $(grep 'attach failed' "$T/all.out")"
echo "ok   - training.conf's CPU plugins attach as nobody with: $caps"
without() { echo "$caps" | tr ' ' '\n' | grep -vx "$1" | paste -sd' '; }
# Without either, no probe attaches: one line says what is missing, exit 1.
for c in CAP_BPF CAP_PERFMON; do
	as_service "$(without $c)" "$T/cpu.conf" "no-$c" 1
	grep -q "no probe could attach: tracing needs .*lacks $c" "$T/no-$c.out" ||
		fail "without $c: $(tail -3 "$T/no-$c.out")"
done
as_service "$(without CAP_NET_ADMIN)" "$T/cpu.conf" no-net
[ "$(state_of net.0 no-net)" = failed ] && [ "$(state_of sched.0 no-net)" = detached ] ||
	fail "without CAP_NET_ADMIN: net.0 $(state_of net.0 no-net)"
samples() { grep -c root_loop_for_caps_test "$T/state/py.jsonl" || true; }
as_service "$caps" "$T/py.conf" py
n_all=$(samples)
[ "$n_all" -gt 0 ] || fail "python (other_users) sampled nothing of root's loop: $(tail -5 "$T/py.out")"
rm -f "$T/state/py.jsonl"
as_service "$(without CAP_SYS_PTRACE)" "$T/py.conf" py-noptrace
[ "$(samples)" = 0 ] || fail "without CAP_SYS_PTRACE root's loop was still sampled"
as_service "$(without CAP_DAC_READ_SEARCH)" "$T/cpu.conf" no-dac
if [ "$(stat -c %a /sys/kernel/tracing)" = 700 ]; then
	grep -q "tracefs is not mounted and could not be mounted: Permission denied" "$T/no-dac.out" ||
		fail "without CAP_DAC_READ_SEARCH tracefs (mode 0700) was still readable"
	grep -q "tracefs" "$T/all.out" && fail "tracefs unreadable with CAP_DAC_READ_SEARCH"
fi
echo "ok   - each capability is needed: CAP_BPF, CAP_PERFMON (every probe), CAP_NET_ADMIN (net)," \
	"CAP_SYS_PTRACE (python read $n_all samples of root's loop, 0 without), CAP_DAC_READ_SEARCH (tracefs)"

# ---- 5. the unit under systemd -------------------------------------------
if [ -d /run/systemd/system ]; then
	U=ntcore-itest-$$
	sed -e "s|^ExecStart=.*|ExecStart=$NTCORE -c $T/cpu.conf|" \
		-e "/^\[Service\]/a Environment=NTCORE_PLUGIN_PATH=$NTCORE_PLUGIN_PATH" \
		"$UNIT" >"/run/systemd/system/$U.service"
	systemctl daemon-reload
	systemctl start "$U" || fail "systemctl start: $(journalctl -u "$U" -o cat | tail -20)"
	sleep 2
	systemctl reload "$U"
	sleep 2
	[ "$(systemctl is-active "$U")" = active ] || fail "$U is not active"
	journalctl -u "$U" -o cat >"$T/journal.txt"
	systemctl stop "$U"
	rm -f "/run/systemd/system/$U.service"
	systemctl daemon-reload
	for p in sched.0 mem.0 io.0 net.0 python.0; do
		grep -q "\[probe:$p\] attached" "$T/journal.txt" || fail "$p not attached under systemd: $(grep -E 'error|fail' "$T/journal.txt" | head -5)"
	done
	grep -q "attach failed" "$T/journal.txt" && fail "under systemd: $(grep 'attach failed' "$T/journal.txt")"
	echo "ok   - under systemd: started (READY=1), reloaded, stopped; every CPU probe attached"
else
	echo "note - systemd is not PID 1 here: the unit was checked offline (3) and its capabilities under setpriv (4)"
fi
echo "systemd: all passed"
