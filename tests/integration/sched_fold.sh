#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sched: run-queue samples of processes past max_processes are folded into
# the pid="other" histogram, which is not a loss (issue 18: they were
# counted in ntcore_events_dropped_total{stage="map_full"}). With
# max_processes = 2 and 24 busy processes host-wide, the run must count no
# drop, fold samples (ntcore_sched_runqueue_folded_total > 0) and show them
# in the "other" histogram.
# usage: sched_fold.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init sched "${1:-}"
nt_test_tmp nt-schedfold

cat >"$T/f.conf" <<C
# the folded histogram is pid="other": pid kept host-wide (issue 21's
# host-wide default drops it)
ntcore = { identity_labels = ["declared"]; };
plugins = (
  { plugin = "sched"; max_processes = 2; interval_ms = 200; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; events = [ "none" ]; }
);
C
pids=()
for i in $(seq 24); do
	sh -c 'while :; do :; done' &
	pids+=($!)
done
test_cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
"$NTCORE" -c "$T/f.conf" -d 2 >"$T/stdout" 2>"$T/stderr" ||
	fail "ntcore exited $?: $(tail -3 "$T/stderr")"
test_cleanup
python3 - "$T" <<'PY' || fail "see above"
import json, re, sys
T = sys.argv[1]
folded = other = 0
drops = {}
for line in open(f"{T}/out.jsonl"):
    e = json.loads(line)
    if e.get("type") != "metric":
        continue
    if e["name"] == "ntcore_sched_runqueue_folded_total":
        folded = max(folded, e["value"])
    elif e["name"] == "ntcore_sched_runqueue_latency_seconds" and e["labels"]["pid"] == "other":
        other = max(other, e["count"])
    elif e["name"] == "ntcore_events_dropped_total" and e["labels"]["plugin"] == "sched.0":
        drops[e["labels"]["stage"]] = e["value"]
bad = []
if drops.get("map_full"):
    bad.append(f"{drops['map_full']:.0f} samples counted as dropped (map_full): folding loses nothing")
if not folded or not other:
    bad.append(f"folded {folded}, 'other' histogram count {other}: want both > 0")
for b in bad:
    print("  " + b)
print(f"folded {folded:.0f} samples into pid=\"other\" ({other} in its histogram), drops {drops or 0}")
sys.exit(1 if bad else 0)
PY
echo "sched_fold.sh: ok"
