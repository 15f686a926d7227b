#!/bin/bash
# SPDX-License-Identifier: MIT
# gRPC sink on a real kernel workload: the sched probe on a known child.
#
# `ntcore -- python3 child.py` where the child forks three `sleep 0.3`
# processes one after the other. The sched probe's events go to the gRPC
# sink (-> the independent Python receiver) and to the file sink at once.
# Asserted:
#   - each of the three sleeps appears in exactly one final sched.thread log
#     record (exited = true) with process.pid = thread.id = its pid and
#     thread.name "sleep", an on-CPU time below its off-CPU time;
#   - the receiver got exactly the sched.thread and sched.report records the
#     file sink wrote: same count, and record by record the same time, pid,
#     tid, comm and every field value (sched.report's text is the body);
#   - the sched metric points arrived, and the final context switch counter
#     of each sleep equals what its events add up to (metrics are exported
#     every 150 ms: the probe keeps an exited process's series 2 ticks of
#     200 ms).
# Usage: grpc_sched.sh BUILD_ROOT
set -euo pipefail
B=$(realpath "${1:?usage: grpc_sched.sh BUILD_ROOT}")
S=$(realpath "$(dirname "$0")/../..")
T=$(mktemp -d /tmp/ntcore-grpc-sched.XXXXXX)
RPID_rx=
cleanup() {
	[ -n "$RPID_rx" ] && kill "$RPID_rx" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ -n "${KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
. "$S/tests/integration/grpc/lib.sh"
need_tools
[ "$(id -u)" -eq 0 ] || fail "must run as root (the sched probe loads BPF)"
[ -f "$B/plugins/sched/sched.so" ] || fail "no $B/plugins/sched/sched.so (build with -Dplugins=...,sched)"
export NTCORE_PLUGIN_PATH="$B/plugins:$B/sinks"

cat >"$T/child.py" <<'EOF'
import os, sys
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os.execvp("sleep", ["sleep", "0.3"])
    os.waitpid(pid, 0)
    pids.append(pid)
with open(sys.argv[1], "w") as f:
    f.write(" ".join(map(str, pids)) + "\n")
EOF

start_receiver rx
cat >"$T/sched.conf" <<EOF
plugins = (
  { plugin = "sched"; required = true; interval_ms = 200; },
  { plugin = "grpc"; endpoint = "127.0.0.1:$PORT_rx"; events = [ "sched.*" ];
    batch_size = 64; batch_timeout_ms = 100; metrics_interval_ms = 150; },
  { plugin = "file"; path = "$T/file.jsonl"; events = [ "sched.*" ]; }
);
EOF
rc=0
timeout 60 "$NTCORE" -c "$T/sched.conf" -- /usr/bin/python3 "$T/child.py" "$T/pids" \
	>"$T/ntcore.log" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$T/ntcore.log" >&2; fail "ntcore exited with $rc"; }
stop_receiver rx
RPID_rx=
if grep -q "cannot export" "$T/ntcore.log"; then cat "$T/ntcore.log" >&2; fail "export failed"; fi

$PY - "$T/rx.jsonl" "$T/file.jsonl" "$T/pids" <<'EOF' || fail "sched workload through gRPC"
import json, sys
rx = [json.loads(l) for l in open(sys.argv[1])]
fl = [json.loads(l) for l in open(sys.argv[2])]
pids = [int(p) for p in open(sys.argv[3]).read().split()]

def val(v):
    return v[1]

def rx_key(r):
    a = r["attrs"]
    fields = tuple(sorted((k, val(v)) for k, v in a.items()
                          if k not in ("ntcore.event.type", "process.pid", "thread.id", "thread.name")))
    return (r["event_name"], r["time"], val(a["process.pid"]), val(a["thread.id"]),
            val(a["thread.name"]), fields)

def file_key(e):
    fields = tuple(sorted((k, v) for k, v in e.items()
                          if k not in ("ts", "type", "pid", "tid", "comm")))
    return (e["type"], e["ts"], e["pid"], e["tid"], e["comm"], fields)

for kind in ("sched.thread", "sched.report"):
    got = sorted(rx_key(r) for r in rx if r["kind"] == "log" and r["event_name"] == kind)
    want = sorted(file_key(e) for e in fl if e.get("type") == kind)
    assert want, "the file sink has no %s events" % kind
    assert len(got) == len(want), "%s: receiver %d records, file sink %d" % (kind, len(got), len(want))
    for g, w in zip(got, want):
        assert g == w, "%s differs:\n  grpc %r\n  file %r" % (kind, g, w)
    print("%s: %d records, identical to the file sink's" % (kind, len(got)))

reports = [r for r in rx if r["kind"] == "log" and r["event_name"] == "sched.report"]
assert all(r["body"] == ["s", r["attrs"]["text"][1]] for r in reports), "report body is not its text"

th = [r for r in rx if r["kind"] == "log" and r["event_name"] == "sched.thread"]
for pid in pids:
    mine = [r for r in th if r["attrs"]["thread.id"][1] == pid]
    fin = [r for r in mine if r["attrs"]["exited"] == ["b", True]]
    assert len(fin) == 1, "sleep pid %d: %d final records" % (pid, len(fin))
    a = fin[0]["attrs"]
    assert a["process.pid"] == ["i", pid], a["process.pid"]
    assert a["thread.name"] == ["s", "sleep"], a["thread.name"]
    on = sum(r["attrs"]["oncpu_ns"][1] for r in mine)
    off = sum(r["attrs"]["offcpu_ns"][1] for r in mine)
    assert a["total_oncpu_ns"] == ["i", on], "pid %d: total %r != sum %d" % (pid, a["total_oncpu_ns"], on)
    assert on < off, "pid %d: on-CPU %d >= off-CPU %d for a sleep" % (pid, on, off)
    sw = sum(r["attrs"]["vol_switches"][1] + r["attrs"]["invol_switches"][1] for r in mine)
    pts = {}
    for m in rx:
        if m["kind"] == "metric" and m["name"] == "ntcore_sched_context_switches_total":
            for p in m["points"]:
                lab = {k: v[1] for k, v in p["attrs"].items()}
                if lab.get("process.pid") == str(pid):  # OTLP: semantic-convention keys (issue 21)
                    pts[lab["kind"]] = p["value"]
    assert pts, "no ntcore_sched_context_switches_total point for pid %d" % pid
    assert sum(pts.values()) == sw, "pid %d: metric %r != events %d" % (pid, pts, sw)
    print("sleep pid %d: one final record, on-CPU %.3f ms, off-CPU %.1f ms, %d switches (metric agrees)"
          % (pid, on / 1e6, off / 1e6, sw))
names = {m["name"] for m in rx if m["kind"] == "metric"}
assert any(n.startswith("ntcore_sched_") for n in names), "no sched metric arrived"
print("metric families received: %d" % len(names))
EOF
echo "PASS"
