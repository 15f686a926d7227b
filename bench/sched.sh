#!/bin/bash
# bench/sched.sh [--smoke] [BUILD_ROOT]
#
# Cost of the sched probe on a context-switch-heavy workload, measured side
# by side in one run (modes interleaved, median of the repetitions):
#   base         bench/sched/pingpong alone: two processes pinned to one CPU
#                handing a byte back and forth (2 context switches a round)
#   ntcore       ntcore -c agg.conf -- pingpong   (targets only; default
#                aggregation in BPF maps, no per-switch events)
#   ntcore-host  ntcore host-wide in the background, pingpong beside it
#   ntcore-sw    ntcore with switch_events = true: one sched.switch event per
#                switch through the bus into the file sink writing /dev/null
#   bpftrace     bpftrace counting sched_switch per prev_pid (host-wide):
#                tracepoint:sched:sched_switch { @[args->prev_pid] = count(); }
# and prints each mode's run time over base, the added ns per switch, the
# sched.switch events per second the bus delivered (from the daemon's
# summary, sched.0 "events in", over the timed loop), and the in-kernel cost
# of one sched_switch program run for ntcore and bpftrace, from the kernel's
# BPF statistics (kernel.bpf_stats_enabled is set to 1 for the run and put
# back after; the stats add a little to every mode alike). On a shared or
# noisy machine the run-time ratios wander; the per-run cost does not.
#
# --smoke: one short repetition (< 30 s); CI runs only this.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_bench_init sched 20 "$@"
command -v cc >/dev/null || fail "needs a C compiler (cc)"

if [ "$SMOKE" -eq 1 ]; then
	ROUNDS=30000 REPS=1
else
	ROUNDS=100000 REPS=5
fi
HAVE_BPFTRACE=1
command -v bpftrace >/dev/null || HAVE_BPFTRACE=0

nt_bench_tmp
nt_bench_stats_on ||
	echo "bench/sched: warning: cannot enable kernel.bpf_stats_enabled: no per-run cost" >&2

cc -O2 -Wall -o "$T/pingpong" "$ROOT/bench/sched/pingpong.c"
# Classic tracepoints (bpftrace) need tracefs; ntcore mounts it too.
if [ ! -d /sys/kernel/tracing/events ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null ||
		echo "bench/sched: warning: cannot mount tracefs; bpftrace may fail" >&2
fi

# The file sink writes to /dev/null: never rotate (max_size_mb = 0).
conf() { # NAME "sched keys"
	cat >"$T/$1.conf" <<EOF
ntcore = { log_level = "warn"; };
plugins = (
  { plugin = "sched"; required = true; log_level = "info"; $2 },
  { plugin = "file"; path = "/dev/null"; max_size_mb = 0; metrics = true; interval_ms = 1000; }
);
EOF
}
conf agg ""
conf sw "switch_events = true; ringbuf_kb = 4096;"

secs() { sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$1" | tail -1; }

wait_for() { # FILE PATTERN: up to 20 s
	for _ in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

run_mode() { # MODE REP -> appends "MODE seconds [events]" to $T/results
	local m=$1 r=$2 log=$T/$1.$2
	case $m in
	base)
		"$T/pingpong" -n "$ROUNDS" >"$log.out"
		;;
	ntcore)
		"$NTCORE" -c "$T/agg.conf" -- "$T/pingpong" -n "$ROUNDS" >"$log.out" 2>"$log.err" ||
			fail "ntcore failed: $(cat "$log.err")"
		;;
	ntcore-sw)
		"$NTCORE" -c "$T/sw.conf" -- "$T/pingpong" -n "$ROUNDS" >"$log.out" 2>"$log.err" ||
			fail "ntcore (switch_events) failed: $(cat "$log.err")"
		;;
	ntcore-host)
		"$NTCORE" -v -c "$T/agg.conf" -d 120 >"$log.bg" 2>&1 &
		BG=$!
		wait_for "$log.bg" "attached" || fail "host-wide ntcore did not attach: $(cat "$log.bg")"
		sleep 0.3
		"$T/pingpong" -n "$ROUNDS" >"$log.out"
		kill -INT "$BG"
		wait "$BG" || fail "host-wide ntcore failed: $(cat "$log.bg")"
		BG=
		;;
	bpftrace)
		bpftrace -e 'tracepoint:sched:sched_switch { @[args->prev_pid] = count(); }' \
			>"$log.bg" 2>&1 &
		BG=$!
		wait_for "$log.bg" "Attaching" || fail "bpftrace did not attach: $(cat "$log.bg")"
		sleep 0.5
		"$T/pingpong" -n "$ROUNDS" >"$log.out"
		# Its sched_switch program: the newest tracepoint program of that
		# name (ours was loaded last).
		bpftool prog show -j 2>/dev/null | python3 -c '
import json, sys
p = [p for p in json.load(sys.stdin) if p.get("type") == "tracepoint" and p.get("name") == "sched_switch"]
p = max(p, key=lambda p: p["id"]) if p else {}
if p.get("run_cnt"):
    print("%d %.1f" % (p["run_cnt"], p["run_time_ns"] / p["run_cnt"]))' >"$log.cost" || true
		kill -INT "$BG"
		wait "$BG" || true
		BG=
		;;
	esac
	local s
	s=$(secs "$log.out")
	[ -n "$s" ] || fail "$m: no timing from pingpong"
	local ev="" cost=""
	case $m in
	ntcore*)
		# "BPF cost: sched_switch_btf N runs, avg X ns" from the probe
		cost=$(sed -n 's/.*BPF cost: sched_switch_[a-z]* \([0-9]*\) runs, avg \([0-9]*\) ns.*/\1 \2/p' \
			"$log.err" "$log.bg" 2>/dev/null | tail -1 || true)
		;;
	bpftrace) cost=$(cat "$log.cost" 2>/dev/null || true) ;;
	esac
	echo "$m ${cost:-- -}" >>"$T/cost"
	if [ "$m" = ntcore-sw ]; then
		# summary line: "  sched.0   probe  STATE  EVENTS_IN  EVENTS_OUT  DROPPED"
		ev=$(awk '$1 == "sched.0" { print $4, $6 }' "$log.err" | tail -1)
		[ -n "$ev" ] || fail "no sched.0 line in the summary: $(cat "$log.err")"
	fi
	echo "$m $s $ev" >>"$T/results"
}

MODES="base ntcore ntcore-host ntcore-sw"
[ "$HAVE_BPFTRACE" -eq 1 ] && MODES="$MODES bpftrace"
echo "bench/sched: pingpong $ROUNDS rounds (2 switches each, pinned to CPU 0), $REPS repetition(s), modes: $MODES"
[ "$HAVE_BPFTRACE" -eq 1 ] || echo "bench/sched: bpftrace not installed: no peer column" >&2
for r in $(seq "$REPS"); do
	for m in $MODES; do
		run_mode "$m" "$r"
	done
done

touch "$T/cost"
python3 - "$T/results" "$ROUNDS" "$MODES" "$T/cost" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
rounds = int(sys.argv[2])
modes = sys.argv[3].split()
med = {m: statistics.median(float(r[1]) for r in rows if r[0] == m) for m in modes}
base = med["base"]
sw = 2 * rounds
print("%-12s %10s %10s %12s %14s" % ("mode", "seconds", "vs base", "ns/switch+", "switches/s"))
for m in modes:
    s = med[m]
    print("%-12s %10.4f %9.2fx %12.0f %14.0f"
          % (m, s, s / base, (s - base) * 1e9 / sw, sw / s))
ev = [r for r in rows if r[0] == "ntcore-sw" and len(r) >= 4]
if ev:
    n = statistics.median(int(r[2]) for r in ev)
    drops = max(int(r[3]) for r in ev)
    print("sched.switch events through the bus: %d per run, %.0f events/s over the "
          "timed loop (%.2f per switch), dropped %d"
          % (n, n / med["ntcore-sw"], n / sw, drops))
if "bpftrace" in med:
    print("ratio ntcore / bpftrace run time: %.2f (ntcore aggregating per thread in BPF, "
          "bpftrace counting per prev_pid)" % (med["ntcore"] / med["bpftrace"]))
    print("ratio ntcore-host / bpftrace run time: %.2f (both host-wide)"
          % (med["ntcore-host"] / med["bpftrace"]))
cost = {}
for l in open(sys.argv[4]):
    r = l.split()
    if len(r) >= 3 and r[1] != "-":
        cost.setdefault(r[0], []).append(float(r[2]))
if cost:
    c = {m: statistics.median(v) for m, v in cost.items()}
    print("in-kernel cost of one sched_switch program run (bpf_stats, median): " +
          ", ".join("%s %.0f ns" % (m, c[m]) for m in modes if m in c))
    if "bpftrace" in c and "ntcore-host" in c:
        print("ratio per-run cost ntcore-host / bpftrace: %.2f; ntcore (targets) / bpftrace: %.2f"
              % (c["ntcore-host"] / c["bpftrace"], c.get("ntcore", 0) / c["bpftrace"]))
else:
    print("in-kernel cost: unavailable (kernel.bpf_stats_enabled could not be set)")
EOF
