#!/bin/bash
# Integration test of the sched probe (root, real kernel): runs known
# children under `ntcore -c CONF -- CMD` and checks the file sink's JSON
# lines against what the children did.
#   1. CPU-bound grandchild (burns 1.0 s of CPU, forked by sh so the core's
#      fork following is exercised): its pid gets >= 0.8 s on-CPU, agreeing
#      with the kernel's own /proc/PID/schedstat; a CPU burner outside the
#      target set never shows up. Run with attach = "tp_btf" and "raw_tp".
#   2. Sleeping child (sleep 1): >= 0.9 s off-CPU, < 0.2 s on-CPU; with
#      switch_events it also yields sched.switch records of itself.
#   3. Two threads of one process: a worker burning 0.5 s of CPU and the
#      main thread sleeping 1 s are told apart by tid; the worker renames
#      itself and events and metric series follow.
#   4. -p PID of a running process whose main thread sleeps through the
#      whole run (no tracepoint ever fires for it) and whose other thread
#      burns CPU: both are reported, the burner within the kernel's figure.
# Usage: sched.sh BUILD_ROOT
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_init sched "$@"

OUTSIDER=
test_cleanup() { [ -n "$OUTSIDER" ] && kill "$OUTSIDER" 2>/dev/null || true; }
nt_test_tmp ntcore-sched

# write_conf OUT.jsonl "extra sched keys"
write_conf() {
	cat >"$T/sched.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "sched"; required = true; interval_ms = 200; $2 },
  { plugin = "file"; path = "$1"; metrics = true; interval_ms = 1000; }
);
EOF
}

# run_ntcore LOG -- CMD...
run_ntcore() {
	local log=$1
	shift 2
	local rc=0
	timeout 40 "$NTCORE" -c "$T/sched.conf" -- "$@" >"$log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		cat "$log" >&2
		fail "ntcore exited with $rc running: $*"
	fi
}

# The burner: 1.0 s of CPU, then its pid and the kernel's on-CPU ns
# (/proc/self/schedstat, field 1) into $1.
cat >"$T/burn.py" <<'EOF'
import os, sys, time
while time.process_time() < float(sys.argv[2]):
    pass
with open("/proc/self/schedstat") as f:
    ns = int(f.read().split()[0])
with open(sys.argv[1], "w") as f:
    f.write("%d %d\n" % (os.getpid(), ns))
EOF

# --- 1. CPU-bound grandchild, both attach flavours ---------------------
python3 "$T/burn.py" "$T/outsider" 30 &
OUTSIDER=$!
for flavour in tp_btf raw_tp; do
	out=$T/cpu-$flavour.jsonl
	write_conf "$out" "attach = \"$flavour\";"
	run_ntcore "$T/cpu-$flavour.log" -- sh -c "python3 '$T/burn.py' '$T/burn.pid' 1.0; true"
	grep -q "attached ($flavour)" "$T/cpu-$flavour.log" ||
		fail "$flavour: log does not say 'attached ($flavour)': $(cat "$T/cpu-$flavour.log")"
	python3 - "$out" "$T/burn.pid" "$OUTSIDER" "$flavour" <<'EOF' || fail "CPU-bound child ($flavour)"
import json, sys
out, pidfile, outsider, flavour = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pid, kernel_ns = map(int, open(pidfile).read().split())
ev = [json.loads(l) for l in open(out)]
th = [e for e in ev if e["type"] == "sched.thread"]
mine = [e for e in th if e["pid"] == pid]
on = sum(e["oncpu_ns"] for e in mine)
off = sum(e["offcpu_ns"] for e in mine)
exits = [e for e in mine if e["exited"]]
print("%s: burner pid %d: on-CPU %.3f s (kernel says %.3f s), off-CPU %.3f s, %d events"
      % (flavour, pid, on / 1e9, kernel_ns / 1e9, off / 1e9, len(mine)))
assert mine, "no sched.thread events for the burner pid %d" % pid
assert on >= 0.8e9, "on-CPU %.3f s < 0.8 s" % (on / 1e9)
# Ours runs until exit, the kernel's figure was read just before: equal
# within the exit path (and the first slice if it ran before it was a
# target).
assert kernel_ns * 0.97 <= on <= kernel_ns + 0.15e9, \
    "on-CPU %.3f s disagrees with schedstat %.3f s" % (on / 1e9, kernel_ns / 1e9)
assert len(exits) == 1, "expected one exited=true event, got %d" % len(exits)
assert exits[0]["total_oncpu_ns"] == on, "exit total %d != sum of deltas %d" % (exits[0]["total_oncpu_ns"], on)
sw = sum(e["vol_switches"] + e["invol_switches"] for e in mine)
assert sw > 0, "no context switches counted"
assert not [e for e in th if e["pid"] == outsider], "the outsider %d (not a target) was traced" % outsider
# Metrics: the last line of the burner's on-CPU series, its switches, and a
# run-queue histogram of its pid.
last = {}
for e in ev:
    if e["type"] == "metric":
        key = (e["name"], tuple(sorted(e.get("labels", {}).items())))
        last[key] = e
# The series carries the thread's current name; one under its name before
# exec ("sh") may have been written before it moved.
comm = exits[0]["comm"]
oncpu_m = [v for (n, l), v in last.items()
           if n == "ntcore_sched_oncpu_seconds_total" and dict(l).get("pid") == str(pid)
           and dict(l).get("comm") == comm]
assert oncpu_m, "no ntcore_sched_oncpu_seconds_total{pid=\"%d\"} line" % pid
m = sum(v["value"] for v in oncpu_m)
assert abs(m - on / 1e9) < 0.01, "metric %.3f s != events %.3f s" % (m, on / 1e9)
csw = [v for (n, l), v in last.items()
       if n == "ntcore_sched_context_switches_total" and dict(l).get("pid") == str(pid)]
assert {dict(l)["kind"] for (n, l), v in last.items()
        if n == "ntcore_sched_context_switches_total" and dict(l).get("pid") == str(pid)} \
    == {"voluntary", "involuntary"}, "context switch kinds missing"
assert sum(v["value"] for v in csw) == sw, "switch metric %s != events %d" % (sum(v["value"] for v in csw), sw)
h = [v for (n, l), v in last.items()
     if n == "ntcore_sched_runqueue_latency_seconds" and dict(l).get("pid") == str(pid)]
assert h and h[0]["count"] > 0, "no run-queue histogram for pid %d" % pid
rep = [e for e in ev if e["type"] == "sched.report"]
assert rep and str(pid) in rep[-1]["text"], "sched.report lacks the burner"
print("%s: metric on-CPU %.3f s, %d switches, %d run-queue waits; report ok"
      % (flavour, m, sw, h[0]["count"]))
EOF
done
kill "$OUTSIDER" 2>/dev/null || true
wait "$OUTSIDER" 2>/dev/null || true
OUTSIDER=

# --- 2. Sleeping child --------------------------------------------------
out=$T/sleep.jsonl
write_conf "$out" "switch_events = true;"
run_ntcore "$T/sleep.log" -- sh -c "echo \$\$ > '$T/sleep.pid'; exec sleep 1"
python3 - "$out" "$T/sleep.pid" <<'EOF' || fail "sleeping child"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pid = int(open(sys.argv[2]).read())
mine = [e for e in ev if e["type"] == "sched.thread" and e["pid"] == pid]
on = sum(e["oncpu_ns"] for e in mine)
off = sum(e["offcpu_ns"] for e in mine)
print("sleeper pid %d: off-CPU %.3f s, on-CPU %.3f s" % (pid, off / 1e9, on / 1e9))
assert off >= 0.9e9, "off-CPU %.3f s < 0.9 s" % (off / 1e9)
assert off <= 1.5e9, "off-CPU %.3f s > 1.5 s" % (off / 1e9)
assert on < 0.2e9, "on-CPU %.3f s for a sleeper" % (on / 1e9)
assert sum(e["vol_switches"] for e in mine) >= 1, "the sleep was not a voluntary switch"
sw = [e for e in ev if e["type"] == "sched.switch" and e["pid"] == pid]
assert sw, "switch_events = true gave no sched.switch for pid %d" % pid
assert any(e["prev_state"] != 0 and not e["preempt"] for e in sw), "no blocking switch-out of the sleeper"
print("sleeper: %d sched.switch records" % len(sw))
EOF

# --- 3. Two threads, told apart -----------------------------------------
out=$T/threads.jsonl
write_conf "$out" ""
cat >"$T/threads.py" <<'EOF'
import ctypes, os, sys, threading, time
tids = {}
def work():
    tids["worker"] = threading.get_native_id()
    # prctl(PR_SET_NAME): the probe must follow the rename (task_rename)
    ctypes.CDLL(None).prctl(15, b"nt-worker", 0, 0, 0)
    while time.thread_time() < 0.5:
        pass
t = threading.Thread(target=work)
t.start()
tids["main"] = threading.get_native_id()
time.sleep(1.0)
t.join()
with open(sys.argv[1], "w") as f:
    f.write("%d %d %d\n" % (os.getpid(), tids["main"], tids["worker"]))
EOF
run_ntcore "$T/threads.log" -- python3 "$T/threads.py" "$T/threads.ids"
python3 - "$out" "$T/threads.ids" <<'EOF' || fail "two threads"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pid, main, worker = map(int, open(sys.argv[2]).read().split())
def tot(tid, f):
    return sum(e[f] for e in ev if e["type"] == "sched.thread" and e["tid"] == tid and e["pid"] == pid)
w_on, m_off, m_on = tot(worker, "oncpu_ns"), tot(main, "offcpu_ns"), tot(main, "oncpu_ns")
print("pid %d: worker %d on-CPU %.3f s; main %d off-CPU %.3f s, on-CPU %.3f s"
      % (pid, worker, w_on / 1e9, main, m_off / 1e9, m_on / 1e9))
assert w_on >= 0.45e9, "worker on-CPU %.3f s < 0.45 s" % (w_on / 1e9)
assert m_off >= 0.9e9, "main off-CPU %.3f s < 0.9 s" % (m_off / 1e9)
assert m_on < w_on, "main thread shows more CPU than the worker"
wev = [e for e in ev if e["type"] == "sched.thread" and e["tid"] == worker]
assert wev[-1]["exited"] and wev[-1]["comm"] == "nt-worker", \
    "worker's final event: comm %r exited %r, want nt-worker, true" % (wev[-1]["comm"], wev[-1]["exited"])
series = {e["labels"]["comm"] for e in ev if e["type"] == "metric"
          and e["name"] == "ntcore_sched_oncpu_seconds_total" and e["labels"]["tid"] == str(worker)}
assert "nt-worker" in series, "no on-CPU series with comm=nt-worker for the worker: %s" % series
last = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_sched_oncpu_seconds_total"
        and e["labels"]["tid"] == str(worker)][-1]
assert last["labels"]["comm"] == "nt-worker" and abs(last["value"] - w_on / 1e9) < 0.01, \
    "worker's last on-CPU series %s, want comm nt-worker and %.3f s" % (last, w_on / 1e9)
print("worker renamed itself: events and metric series follow (comm nt-worker, %.3f s)" % last["value"])
EOF
# --- 4. -p PID: threads that existed before attach ----------------------
out=$T/attach.jsonl
write_conf "$out" ""
cat >"$T/attach.py" <<'EOF'
import sys, threading, time
def burn():
    e = time.time() + 30
    while time.time() < e:
        pass
t = threading.Thread(target=burn, daemon=True)
t.start()
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % t.native_id)
time.sleep(30)
EOF
python3 "$T/attach.py" "$T/attach.tid" &
OUTSIDER=$!
for _ in $(seq 50); do [ -s "$T/attach.tid" ] && break; sleep 0.1; done
[ -s "$T/attach.tid" ] || fail "-p: the test process did not start"
# The python3 on PATH may be a wrapper that forks: take the process that
# owns the burner thread.
BURNER=$(cat "$T/attach.tid")
APID=$(awk '/^Tgid:/ { print $2 }' "/proc/$BURNER/status")
se0=$(cut -d' ' -f1 "/proc/$APID/task/$BURNER/schedstat")
rc=0
timeout 40 "$NTCORE" -c "$T/sched.conf" -p "$APID" -d 2 >"$T/attach.log" 2>&1 || rc=$?
se1=$(cut -d' ' -f1 "/proc/$APID/task/$BURNER/schedstat")
kill "$APID" "$OUTSIDER" 2>/dev/null || true
wait "$OUTSIDER" 2>/dev/null || true
OUTSIDER=
[ "$rc" -eq 0 ] || { cat "$T/attach.log" >&2; fail "ntcore -p exited with $rc"; }
python3 - "$out" "$APID" "$BURNER" "$se0" "$se1" <<'EOF' || fail "-p PID"
import json, sys
out, pid, burner, se0, se1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ev = [json.loads(l) for l in open(out) if '"sched.thread"' in l]
def tot(tid, f):
    return sum(e[f] for e in ev if e["pid"] == pid and e["tid"] == tid)
b_on, m_on, m_off = tot(burner, "oncpu_ns"), tot(pid, "oncpu_ns"), tot(pid, "offcpu_ns")
print("-p %d: burner %d on-CPU %.3f s (kernel: %.3f s over the whole ntcore run); "
      "sleeping main thread off-CPU %.3f s, on-CPU %.3f s"
      % (pid, burner, b_on / 1e9, (se1 - se0) / 1e9, m_off / 1e9, m_on / 1e9))
assert b_on >= 0.2e9, "burner on-CPU %.3f s < 0.2 s" % (b_on / 1e9)
assert b_on <= se1 - se0 + 0.05e9, "burner on-CPU above the kernel's figure"
assert m_off >= 0.5e9, "the sleeping main thread shows %.3f s off-CPU" % (m_off / 1e9)
assert m_on < 0.05e9, "the sleeping main thread shows %.3f s on-CPU" % (m_on / 1e9)
EOF
echo "PASS sched"
