#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Each sink behind its own bounded queue (issue 17): a fixture probe
# publishes N numbered events as fast as the loop takes them; one sink
# sleeps 20 us per event (fixture_slow), a file sink writes JSON Lines.
# Must hold:
#  - the producer is not held back: publishing takes well under what the
#    slow sink would impose on a synchronous bus (N * 20 us);
#  - the file sink loses nothing: exactly N lines, seq 0..N-1 in order,
#    0 dropped in the summary;
#  - the slow sink loses only its own events, counted exactly: what it
#    consumed + ntcore_events_dropped_total{stage="sink_queue"} = N, its
#    events never reordered, its drops in the summary and the metric;
#  - a second SIGTERM during the shutdown (host->stop_now) ends the wait
#    for a slow sink's queue: a sink taking 1 ms per event with 20000
#    queued stops within seconds, not 20 s, and what it never consumed is
#    counted: consumed + dropped = published exactly.
# usage: sink_queue.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
export NTCORE_PLUGIN_PATH=$NTCORE_PLUGIN_PATH:$B/tests
[ -f "$B/tests/fixture_gen.so" ] && [ -f "$B/tests/fixture_slow.so" ] ||
	fail "fixtures not built ($B/tests/fixture_{gen,slow}.so)"
nt_test_tmp nt-sinkq

N=200000
cat >"$T/q.conf" <<C
plugins = (
  { plugin = "fixture_gen"; count = $N; batch = 2000; interval_ms = 10;
    report = "$T/gen.txt"; },
  { plugin = "fixture_slow"; delay_us = 20; report = "$T/slow.txt";
    events = [ "gen.*" ]; queue_kb = 4096; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; interval_ms = 100000; }
);
C
"$NTCORE" -c "$T/q.conf" -d 4 >"$T/stdout" 2>"$T/stderr" ||
	fail "ntcore exited $?: $(tail -5 "$T/stderr")"

python3 - "$T" "$N" <<'PY' || fail "see above"
import json, re, sys
T, N = sys.argv[1], int(sys.argv[2])
bad = []
gen = dict(kv.split("=") for kv in open(f"{T}/gen.txt").read().split())
slow = dict(kv.split("=") for kv in open(f"{T}/slow.txt").read().split())
pub_ms = float(gen["publish_ms"])
if int(gen["published"]) != N:
    bad.append(f"the probe published {gen['published']} of {N}")
# a synchronous bus would hold the loop N * 20 us = 4 s in the slow sink
if pub_ms > 1500:
    bad.append(f"publishing took {pub_ms:.0f} ms: the slow sink held the loop")
seqs, metric = [], None
for line in open(f"{T}/out.jsonl"):
    e = json.loads(line)
    if e["type"] == "gen.seq":
        seqs.append(e["seq"])
    elif (e["type"] == "metric" and e["name"] == "ntcore_events_dropped_total"
          and e["labels"] == {"stage": "sink_queue", "plugin": "fixture_slow.0"}):
        metric = e["value"]
if seqs != list(range(N)):
    bad.append(f"file sink: {len(seqs)} lines, want seq 0..{N - 1} in order")
rows = {}
for line in open(f"{T}/stderr"):
    m = re.match(r"\s+(\S+)\s+(probe|sink|detector)\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)$", line)
    if m:
        rows[m[1]] = tuple(int(x) for x in m.group(3, 4, 5))
consumed, ooo = int(slow["consumed"]), int(slow["out_of_order"])
_, out, dropped = rows.get("fixture_slow.0", (0, -1, -1))
if ooo:
    bad.append(f"slow sink saw {ooo} events out of order")
if consumed + dropped != N or out != consumed:
    bad.append(f"slow sink: consumed {consumed} (summary {out}) + dropped {dropped} != {N}")
if not dropped or not consumed:
    bad.append(f"slow sink: consumed {consumed}, dropped {dropped}: the test needs both")
if metric != dropped:
    bad.append(f"ntcore_events_dropped_total{{stage=sink_queue}} = {metric}, summary {dropped}")
if rows.get("file.0", (0, 0, 1))[1:] != (N, 0):
    bad.append(f"file sink summary {rows.get('file.0')}, want {N} out, 0 dropped")
for b in bad:
    print("  " + b)
if bad:
    sys.exit(1)
print(f"published {N} in {pub_ms:.0f} ms; file sink {N} of {N}; slow sink "
      f"{consumed} consumed + {dropped} dropped (counted) = {N}")
PY

# A second SIGTERM ends the wait for a slow sink's queue.
H=20000
cat >"$T/h.conf" <<C
plugins = (
  { plugin = "fixture_gen"; count = $H; batch = 2000; interval_ms = 10;
    report = "$T/hgen.txt"; },
  { plugin = "fixture_slow"; delay_us = 1000; report = "$T/hslow.txt";
    events = [ "gen.*" ]; }
);
C
"$NTCORE" -c "$T/h.conf" >"$T/hstdout" 2>"$T/hstderr" &
pid=$!
sleep 1.5
kill -TERM "$pid"
sleep 0.5
t0=$(date +%s%N)
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || fail "ntcore exited $? after the second SIGTERM: $(tail -5 "$T/hstderr")"
took_ms=$((($(date +%s%N) - t0) / 1000000))
python3 - "$T" "$H" "$took_ms" <<'PY' || fail "see above"
import re, sys
T, N, took = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
gen = dict(kv.split("=") for kv in open(f"{T}/hgen.txt").read().split())
slow = dict(kv.split("=") for kv in open(f"{T}/hslow.txt").read().split())
if int(gen["published"]) != N:
    bad.append(f"the probe published {gen['published']} of {N}")
dropped = None
for line in open(f"{T}/hstderr"):
    m = re.match(r"\s+fixture_slow\.0\s+sink\s+\S+\s+\d+\s+(\d+)\s+(\d+)$", line)
    if m:
        out, dropped = int(m[1]), int(m[2])
consumed = int(slow["consumed"])
if dropped is None:
    bad.append("no summary row for fixture_slow.0")
elif consumed + dropped != N or out != consumed:
    bad.append(f"hurried stop: consumed {consumed} (summary {out}) + dropped {dropped} != {N}")
elif not dropped:
    bad.append("hurried stop: nothing abandoned (the sink was not behind?)")
if took > 3000:
    bad.append(f"the second SIGTERM took {took} ms to end the run")
for b in bad:
    print("  " + b)
if bad:
    sys.exit(1)
print(f"second SIGTERM: run ended {took} ms later; slow sink {consumed} "
      f"consumed + {dropped} abandoned (counted) = {N}")
PY
echo "sink_queue.sh: ok"
