#!/bin/bash
# Integration test of the trace sink's flight recorder (root: BPF).
#  1. an alert writes the recorder out (after dump_delay_ms), with its
#     report page; the dump of the GPU fixture's scenario is checked as
#     exactly as the plain trace; the exit writes a last one
#  2. alerts every 300 ms: one dump, the others rate-limited and counted
#  3. SIGUSR1 writes it out while the run goes on; the dump spans the window
#  4. a planted hang (the cuda_detectors "blocked" workload: a thread stuck
#     in cudaMemcpy; cuda probe + cuda_hang): the alert's dump shows the
#     blocked call as an unfinished slice up to the dump
#  5. memory stays under buffer_mb over a busy run of TRACE_BUSY_S seconds
#     (default 20; the 10-minute run of docs/trace.md: TRACE_BUSY_S=600)
# Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
[ -f "$B/sinks/trace/trace.so" ] || fail "trace sink not built in $B"
PY=/usr/bin/python3
"$PY" -c 'import google.protobuf' 2>/dev/null || fail "python3-protobuf is needed (scripts/setup.sh)"
TR=$HERE/trace
BUSY_S=${TRACE_BUSY_S:-20}
NPID=
test_cleanup() { [ -z "$NPID" ] || kill "$NPID" 2>/dev/null || true; }
nt_test_tmp nt-trace-flight
export NT_PROTO_OUT=$T/pb2
mkdir -p "$NT_PROTO_OUT"

ntcore() { # NAME ARGS...
	local name=$1
	shift
	if ! timeout 120 "$NTCORE" -c "$T/$name.conf" "$@" >"$T/$name.out" 2>&1; then
		cat "$T/$name.out" >&2
		fail "$name: ntcore failed"
	fi
}

# metric NAME LABEL_SUBSTRING JSONL: the last value of a metric series
metric() {
	"$PY" - "$@" <<'PY'
import json, sys
name, label, path = sys.argv[1:4]
v = 0
for line in open(path):
    e = json.loads(line)
    if e.get("type") == "metric" and e["name"] == name and label in json.dumps(e["labels"]):
        v = e["value"]
print(int(v))
PY
}

# ---- 1. an alert dumps ---------------------------------------------------
mkdir -p "$T/a"
cat > "$T/a.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; },
  { plugin = "trace"; mode = "flight"; dir = "$T/a"; prefix = "fr"; dump_delay_ms = 100;
    counters = [ "ntcore_gpufx_*" ]; }
);
CONF
ntcore a -d 2
d=$(ls "$T"/a/fr-*-1-alert.gpufx.pftrace 2>/dev/null) || { ls -la "$T/a" >&2; fail "alert: no dump"; }
[ -f "${d%.pftrace}.html" ] || fail "alert: no report page with the dump"
grep -q "flight recorder written: $d" "$T/a.out" || fail "alert: the dump is not logged"
"$PY" "$TR/check_scenario.py" "$d" 12 || fail "alert: the dump's content"
ls "$T"/a/fr-*-2-exit.pftrace >/dev/null 2>&1 || fail "alert: no dump at exit"
echo "ok - an alert writes the recorder (trace + report), exact content; the exit writes another"

# ---- 2. rate limit ------------------------------------------------------------
mkdir -p "$T/r"
cat > "$T/r.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; mode = "busy"; rate = 1000; alert_every_ms = 300; },
  { plugin = "trace"; mode = "flight"; dir = "$T/r"; prefix = "rl"; dump_delay_ms = 0;
    dump_min_interval_s = 60; report = false; },
  { plugin = "file"; path = "$T/r/metrics.jsonl"; events = [ "none" ]; metrics = true; }
);
CONF
ntcore r -d 2.5
n=$(ls "$T"/r/rl-*-alert.gpufx.pftrace | wc -l)
[ "$n" = 1 ] || fail "rate limit: $n alert dumps, want 1"
rl=$(metric ntcore_trace_dumps_total rate_limited "$T/r/metrics.jsonl")
wr=$(metric ntcore_trace_dumps_total written "$T/r/metrics.jsonl")
[ "$rl" -ge 5 ] && [ "$wr" = 2 ] || fail "rate limit: written $wr (want 2), rate_limited $rl (want >= 5)"
echo "ok - rate limit: 1 alert dump, $rl rate-limited (counted), 1 at exit"

# ---- 3. SIGUSR1 -----------------------------------------------------------------
mkdir -p "$T/u"
cat > "$T/u.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; mode = "busy"; rate = 5000; },
  { plugin = "trace"; mode = "flight"; dir = "$T/u"; prefix = "us"; window_s = 2; }
);
CONF
"$NTCORE" -c "$T/u.conf" -d 6 >"$T/u.out" 2>&1 &
NPID=$!
sleep 4
kill -USR1 "$NPID"
for _ in $(seq 50); do
	grep -q "flight recorder written: .*-1-signal.pftrace" "$T/u.out" && break
	sleep 0.1
done
kill -0 "$NPID" 2>/dev/null || fail "SIGUSR1: ntcore is gone"
grep -q "flight recorder written: .*-1-signal.pftrace" "$T/u.out" ||
	{ cat "$T/u.out" >&2; fail "SIGUSR1: no dump within 5 s"; }
wait "$NPID" || { cat "$T/u.out" >&2; fail "SIGUSR1: ntcore failed"; }
NPID=
"$PY" "$TR/check_window.py" "$(ls "$T"/u/us-*-1-signal.pftrace)" 2 || fail "SIGUSR1: dump content"
[ -f "$(ls "$T"/u/us-*-1-signal.html)" ] || fail "SIGUSR1: no report page"
echo "ok - SIGUSR1 writes the recorder while the run goes on; it spans the window"

# ---- 4. a planted hang ----------------------------------------------------
FIX=$B/plugins/cuda
# the CUDA declarations the fixtures build against (no toolkit needed)
FX_INC=$HERE/../fixtures/cuda
[ -f "$FIX/libcudart.so.13" ] && [ -f "$B/plugins/cuda/detectors/cuda_hang.so" ] ||
	fail "hang: the fixture CUDA runtime and cuda_hang are needed"
${CC:-cc} -std=gnu11 -O1 -g -fno-omit-frame-pointer -rdynamic -I"$FX_INC" \
	"$HERE/cuda_detectors/hang.c" -o "$T/hang" -L"$FIX" -l:libcudart.so.13 \
	-Wl,-rpath,"$FIX" -lpthread || fail "hang: cannot build the workload"
mkdir -p "$T/h"
cat > "$T/h.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "cuda"; enter_events = true; launch_events = true; },
  { plugin = "cuda_hang"; timeout_ms = 1500; interval_ms = 250; },
  { plugin = "trace"; mode = "flight"; dir = "$T/h"; prefix = "hang"; dump_delay_ms = 300; }
);
CONF
(export NTCORE_PLUGIN_PATH=$NTCORE_PLUGIN_PATH:$B/plugins/cuda/detectors; unset LD_LIBRARY_PATH
 ntcore h -- sh -c 'exec "$@" >"$0"' "$T/h/workload.out" "$T/hang" blocked 3000)
d=$(ls "$T"/h/hang-*-1-alert.cuda_hang.pftrace 2>/dev/null) ||
	{ cat "$T/h.out" >&2; ls -la "$T/h" >&2; fail "hang: no dump for the alert"; }
"$PY" "$TR/check_hang.py" "$d" 1500 || fail "hang: the dump does not show the blocked call"
grep -q "blocked in cudaMemcpy" "${d%.pftrace}.html" || fail "hang: the report lacks the alert"
echo "ok - planted hang: the alert's dump ends with the blocked cudaMemcpy, unfinished"

# ---- 5. memory bound over a busy run ----------------------------------------
mkdir -p "$T/m"
cat > "$T/m.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; mode = "busy"; rate = 20000; },
  { plugin = "trace"; mode = "flight"; dir = "$T/m"; prefix = "mem"; window_s = 3600;
    buffer_mb = 32; counters = [ "ntcore_gpufx_*" ]; },
  { plugin = "file"; path = "$T/m/metrics.jsonl"; events = [ "none" ]; metrics = true;
    interval_ms = 1000; }
);
CONF
"$NTCORE" -c "$T/m.conf" -d "$BUSY_S" >"$T/m.out" 2>&1 &
NPID=$!
: > "$T/m/rss"
start=$(date +%s)
while kill -0 "$NPID" 2>/dev/null; do
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$NPID/status" 2>/dev/null || true)
	[ -n "$rss" ] && echo "$(( $(date +%s) - start )) $rss" >> "$T/m/rss"
	if [ "$(( $(date +%s) - start ))" = "$((BUSY_S / 2))" ] && [ ! -e "$T/m/usr1" ]; then
		kill -USR1 "$NPID"
		touch "$T/m/usr1"
	fi
	sleep 0.5
done
wait "$NPID" || { cat "$T/m.out" >&2; fail "busy: ntcore failed"; }
NPID=
"$PY" - "$T/m/rss" "$T/m/metrics.jsonl" "$BUSY_S" 32 <<'PY' || fail "busy: memory bound"
import json, sys
rss_path, metrics_path, secs, bound_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rss = [tuple(map(int, l.split())) for l in open(rss_path) if l.strip()]
rec, evicted, events = [], 0, 0
for line in open(metrics_path):
    e = json.loads(line)
    if e.get("type") != "metric":
        continue
    if e["name"] == "ntcore_trace_recorder_bytes":
        rec.append(e["value"])
    elif e["name"] == "ntcore_trace_recorder_evicted_total":
        evicted = e["value"]
    elif e["name"] == "ntcore_events_out_total" and e["labels"]["plugin"] == "trace.0":
        events = e["value"]
    elif e["name"] == "ntcore_events_dropped_total" and e["value"]:
        sys.exit(f"drops: {e}")
base = next((kb for t, kb in rss if t >= 1), rss[0][1])
peak = max(kb for _, kb in rss)
bound = bound_mb << 20
errs = []
if not rec or max(rec) > bound:
    errs.append(f"recorder held {max(rec or [0]) / 2**20:.1f} MiB, bound {bound_mb} MiB")
if evicted <= 0:
    errs.append("the recorder never evicted: the run did not fill it")
if (peak - base) * 1024 > bound + (16 << 20):
    errs.append(f"RSS grew {(peak - base) / 1024:.1f} MiB over {bound_mb} MiB + 16 MiB")
print(f"busy run {secs} s: {events / secs:.0f} events/s into the sink, recorder peak "
      f"{max(rec or [0]) / 2**20:.1f} MiB (bound {bound_mb} MiB), {evicted:.0f} records evicted, "
      f"ntcore RSS {base / 1024:.1f} MiB at 1 s, peak {peak / 1024:.1f} MiB")
if errs:
    sys.exit("\n".join(errs))
PY
ls "$T"/m/mem-*-signal.pftrace "$T"/m/mem-*-exit.pftrace >/dev/null ||
	fail "busy: the SIGUSR1 or exit dump is missing"
echo "ok - busy run of ${BUSY_S} s: memory stays under buffer_mb"
echo "PASS"
