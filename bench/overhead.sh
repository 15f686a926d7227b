#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/overhead.sh [--smoke] [BUILD_ROOT]
# What each probe costs a training-like job on this machine (issue 17),
# side by side in one run. The job is bench/overhead/trainlike.c: compute
# threads meeting at a barrier each step (futex waits, context switches),
# 8 MiB mapped, touched and unmapped every 4th step (page faults, RSS),
# forked loader processes reading a data file and piping batches, a
# loopback TCP round trip and a log line per step. Modes, interleaved
# round by round (median of the runs' median step times):
#   base       the job alone
#   training   ntcore -c conf.d/training.conf -- job
#   <plugin>   ntcore with that probe alone (training.conf's settings) and a
#              file sink, -- job: sched mem io net cuda nvlink python
# For each: step time over base, ntcore's own CPU time (its summary line),
# and the kernel-side cost of its BPF programs (kernel.bpf_stats_enabled:
# runs and ns per run, read from the programs ntcore holds while the job
# runs). Root (BPF). --smoke: one short round.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_bench_init sched 19 "$@" # any built probe will do
JOB=$B/bench/bench_trainlike
[ -x "$JOB" ] || fail "not built: $JOB"
command -v bpftool >/dev/null || fail "needs bpftool"
nt_bench_tmp
nt_bench_stats_on

STEPS=300 ROUNDS=5
[ "$SMOKE" -eq 1 ] && { STEPS=60; ROUNDS=1; }
MODES="base training sched mem io net cuda nvlink python"
head -c $((64 << 20)) /dev/urandom >"$T/data.bin"
sed "s|ntcore-training|$T/training|" "$ROOT/conf.d/training.conf" >"$T/training.conf"
for p in sched mem io net cuda nvlink python; do
	line=$(grep -E "^\s*\{ plugin = \"$p\";" "$ROOT/conf.d/training.conf" | sed 's/#.*//')
	cat >"$T/$p.conf" <<C
plugins = (
  $line
  { plugin = "file"; path = "$T/$p.jsonl"; metrics = true; }
);
C
done

# run MODE ROUND: one run of the job; appends "MODE ms cpu_s" to $T/results
# and the BPF stats of the programs ntcore held to $T/bpf.MODE
run() {
	local mode=$1 round=$2
	local out=$T/$mode.$round
	if [ "$mode" = base ]; then
		"$JOB" "$T/data.bin" "$T/log" "$STEPS" 2 2 2000 >"$out" 2>&1
	else
		"$NTCORE" -c "$T/$mode.conf" -- "$JOB" "$T/data.bin" "$T/log" "$STEPS" 2 2 2000 \
			>"$out" 2>&1 &
		local pid=$! last=
		while kill -0 $pid 2>/dev/null; do # sample the programs' stats
			local ids
			ids=$(grep -h '^prog_id:' /proc/$pid/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ' || true)
			[ -n "$ids" ] && bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
ids = set(int(x) for x in sys.argv[1].split())
for p in json.load(sys.stdin):
    if p["id"] in ids and p.get("run_cnt"):
        print(p["name"], p["run_cnt"], p["run_time_ns"])' "$ids" >"$T/bpf.tmp" 2>/dev/null && last=1 &&
				cp "$T/bpf.tmp" "$T/bpf.$mode.$round"
			sleep 0.5
		done
		wait $pid || true
	fi
	local ms cpu
	ms=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' "$out")
	[ -n "$ms" ] || fail "$mode: the job did not finish: $(tail -3 "$out")"
	cpu=$(sed -n "s/.*ntcore's own CPU time: \([0-9.]*\) s user, \([0-9.]*\) s system.*/\1 \2/p" "$out" |
		awk '{print $1 + $2}')
	echo "$mode $ms ${cpu:-0}" >>"$T/results"
}

for r in $(seq "$ROUNDS"); do
	for m in $MODES; do run "$m" "$r"; done
done
python3 - "$T" "$MODES" "$STEPS" <<'PY'
import glob, statistics, sys
T, modes, steps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
res = {}
for line in open(f"{T}/results"):
    m, ms, cpu = line.split()
    res.setdefault(m, []).append((float(ms), float(cpu)))
base = statistics.median(x[0] for x in res["base"])
print(f"training-like job, {steps} steps a run, {len(res['base'])} run(s) a mode; median step {base:.3f} ms bare")
print(f"{'mode':10} {'step ms':>9} {'over base':>10} {'ntcore CPU':>11} {'BPF runs/step':>14} {'BPF ns/run':>11} {'BPF ms/step':>12}")
for m in modes:
    ms = statistics.median(x[0] for x in res[m])
    cpu = statistics.median(x[1] for x in res[m])
    runs = tns = 0
    for f in glob.glob(f"{T}/bpf.{m}.*"):
        for line in open(f):
            name, cnt, ns = line.split()
            runs += int(cnt)
            tns += int(ns)
    n = max(1, len(glob.glob(f"{T}/bpf.{m}.*")))
    runs, tns = runs / n, tns / n
    cell = lambda v, f: f.format(v) if m != "base" else "-"
    print(f"{m:10} {ms:9.3f} {cell((ms / base - 1) * 100, '{:+9.2f}%'):>10} "
          f"{cell(cpu, '{:9.3f} s'):>11} {cell(runs / steps, '{:14.0f}'):>14} "
          f"{cell(tns / runs if runs else 0, '{:11.0f}'):>11} {cell(tns / 1e6 / steps, '{:12.4f}'):>12}")
print("BPF: kernel-side time of the programs ntcore holds (bpf_stats), all processes on the host")
print("for the host-wide probes; ntcore CPU: its own threads, user + system, for the whole run")
PY
