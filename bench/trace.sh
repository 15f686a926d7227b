#!/bin/bash
# bench/trace.sh [--smoke] [BUILD_ROOT]
#
# Cost of the trace sink per event, side by side with the file sink (JSON
# Lines) on the same stream, in one run (modes interleaved, median of the
# repetitions). The stream: the trace_gpufx fixture's busy mode (launch
# calls and their cuda.kernel_exec, 2 events a pair) for SECONDS at RATE
# pairs per second. Each mode is one ntcore run; its CPU time (user +
# system, the daemon's rusage) less the base mode's, over the events the
# sink took, is the sink's cost per event:
#   base           the fixture with a sink that takes no event
#   file-jsonl     the file sink, JSON Lines
#   trace-perfetto the trace sink, plain mode, Perfetto protobuf
#   trace-json     the trace sink, plain mode, JSON trace events
#   trace-flight   the trace sink, flight recorder (copying into memory;
#                  the one dump at exit is in its time)
# Prints ns per event, the ratio to file-jsonl and bytes written per event.
#
# --smoke: one short repetition (< 30 s); CI runs only this.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
NT_BENCH=bench/trace
SMOKE=0
B=
for a in "$@"; do
	case $a in
	--smoke) SMOKE=1 ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
B=$(cd "$B" && pwd)
NTCORE=$B/core/ntcore
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (pass the build root)"
[ -f "$B/sinks/trace/trace.so" ] && [ -f "$B/sinks/trace/trace_gpufx.so" ] ||
	fail "no trace sink in $B"
export NTCORE_PLUGIN_PATH=$B/sinks
if [ "$SMOKE" -eq 1 ]; then SECS=1 RATE=20000 REPS=1; else SECS=5 RATE=50000 REPS=5; fi
T=$(mktemp -d /tmp/nt-trace-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

conf() { # MODE: the sink instance of that mode
	case $1 in
	base) echo '{ plugin = "file"; path = "/dev/null"; events = [ "none" ]; }' ;;
	file-jsonl) echo "{ plugin = \"file\"; path = \"$T/out/ev.jsonl\"; max_size_mb = 0; }" ;;
	trace-perfetto) echo "{ plugin = \"trace\"; dir = \"$T/out\"; report = false; max_file_mb = 0; }" ;;
	trace-json) echo "{ plugin = \"trace\"; dir = \"$T/out\"; format = \"json\"; report = false; max_file_mb = 0; }" ;;
	trace-flight) echo "{ plugin = \"trace\"; mode = \"flight\"; dir = \"$T/out\"; report = false; buffer_mb = 4096; window_s = 3600; }" ;;
	esac
}

MODES="base file-jsonl trace-perfetto trace-json trace-flight"
: > "$T/results"
for rep in $(seq "$REPS"); do
	for m in $MODES; do
		rm -rf "$T/out" && mkdir -p "$T/out"
		printf 'plugins = (\n  { plugin = "trace_gpufx"; mode = "busy"; rate = %d; },\n  %s\n);\n' \
			"$RATE" "$(conf "$m")" > "$T/$m.conf"
		r=$(python3 "$ROOT/bench/trace/cpu.py" "$T/$m.out" "$NTCORE" -c "$T/$m.conf" -d "$SECS")
		ev=$(awk '$2 == "sink" { print $5 }' "$T/$m.out" | head -1)
		bytes=$(du -sb "$T/out" | cut -f1)
		echo "$m $rep $r ${ev:-0} $bytes" >> "$T/results"
	done
done

python3 - "$T/results" "$SECS" "$RATE" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, rep, rest = line.split(" ", 2)
    js, ev, by = rest.rsplit(" ", 2)
    r = json.loads(js)
    if r["status"] != 0:
        sys.exit(f"bench/trace: {m} exited with {r['status']}")
    rows.setdefault(m, []).append((r["cpu_s"], int(ev), int(by)))
base = statistics.median(c for c, _, _ in rows["base"])
print(f"bench/trace: {sys.argv[3]} launch pairs/s for {sys.argv[2]} s, median of {len(rows['base'])}")
print(f"  {'mode':16} {'events':>9} {'cpu s':>7} {'ns/event':>9} {'vs jsonl':>9} {'bytes/event':>12}")
cost = {}
for m, rs in rows.items():
    cpu = statistics.median(c for c, _, _ in rs)
    ev = statistics.median(e for _, e, _ in rs)
    by = statistics.median(b for _, _, b in rs)
    cost[m] = (cpu - base) / ev * 1e9 if ev else 0
for m, rs in rows.items():
    cpu = statistics.median(c for c, _, _ in rs)
    ev = statistics.median(e for _, e, _ in rs)
    by = statistics.median(b for _, _, b in rs)
    ratio = cost[m] / cost["file-jsonl"] if m != "base" and cost["file-jsonl"] > 0 else 0
    print(f"  {m:16} {ev:9.0f} {cpu:7.2f} {cost[m] if m != 'base' else 0:9.0f} "
          f"{ratio:8.2f}x {by / ev if ev else 0:12.1f}")
PY
