#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/eventpath.sh [--smoke] [BUILD_ROOT]
# The event path, from one BPF ring buffer to the file sink writing JSON
# Lines to a file (issue 17: >= 10 M events/s, produced = delivered +
# counted drops exactly). The probe bench_ring (bench/eventpath/) has a BPF
# program write records of a 14-field type (bench.thread) into one ring;
# the daemon reads it as it reads every probe's ring and the file sink
# writes it on its own thread. Printed side by side:
#   render     the file sink's compiled renderer against the generic one
#              (bench_render, ns per record, no I/O);
#   drain      N records written into the ring before the loop starts,
#              every sink queue big enough for all (NTCORE_SINK_QUEUE_KB,
#              touched up front), the file on tmpfs: records per second
#              from the loop's first read of the ring to the file sink's
#              last record (its thread's window, printed at -v; the last
#              1 MiB buffer is written after it), nothing may be lost;
#   sustained  the producer writes while the loop reads (default queues,
#              the file in a temporary folder on the disk's filesystem):
#              records written per second while the ring was read, and
#              where the others went (bpf: ring full; sink_queue: the file
#              sink behind; file: a failed write).
# Each checks produced = written + dropped, stage by stage, exactly.
# Root (BPF). --smoke: 200000 records, seconds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
NT_BENCH=bench/eventpath
SMOKE=0
B=
for a in "$@"; do
	case $a in
	--smoke) SMOKE=1 ;;
	-h | --help) sed -n '2,22p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}" && pwd)
NTCORE=$B/core/ntcore
[ "$(id -u)" -eq 0 ] || fail "must run as root"
[ -x "$NTCORE" ] && [ -f "$B/bench/bench_ring.so" ] && [ -x "$B/bench/bench_render" ] ||
	fail "build first (ninja -C $B): no $B/bench/bench_ring.so or bench_render"
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks:$B/bench
T=$(mktemp -d /tmp/ntcore-bench-eventpath.XXXXXX)
SHM=$(mktemp -d /dev/shm/ntcore-bench-eventpath.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T" "$SHM"' EXIT

N=4000000
[ $SMOKE = 1 ] && N=200000
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $N records of 14 fields"
"$B/bench/bench_render" $((N / 2))

# run NAME PREFILL QUEUE_KB DIR: one daemon run; leaves $T/NAME.{report,err,exit}
run() {
	local name=$1 prefill=$2 qkb=$3 dir=$4 ring=$(( N * 160 / 1048576 + 1 ))
	[ "$prefill" = false ] && ring=64
	cat >"$T/$name.conf" <<C
plugins = (
  { plugin = "bench_ring"; count = $N; burst = 65536; ring_mb = $ring;
    prefill = $prefill; report = "$T/$name.report"; },
  { plugin = "file"; path = "$dir/$name.jsonl"; max_size_mb = 0;
    buffer_kb = 1024; interval_ms = 100000; metrics = true; }
);
C
	NTCORE_SINK_QUEUE_KB=$qkb python3 - "$NTCORE" -v -c "$T/$name.conf" -d 120 \
		>"$T/$name.exit" 2>"$T/$name.err" <<'PY' || fail "$name: ntcore failed: $(tail -3 "$T/$name.err")"
import subprocess, sys, time
rc = subprocess.run(sys.argv[1:]).returncode
print(time.clock_gettime_ns(time.CLOCK_MONOTONIC))
sys.exit(rc)
PY
}

# check NAME DIR END(exit|read): prints the line, fails on a miscount
check() {
	python3 - "$T" "$1" "$2" "$3" <<'PY'
import json, re, sys
T, name, d, end = sys.argv[1:]
rep = dict(kv.split("=") for kv in open(f"{T}/{name}.report").read().split())
produced = int(rep["produced"])
written, drops = 0, {}
with open(f"{d}/{name}.jsonl", "rb") as f:
    for line in f:
        if line.startswith(b'{"ts":') and b'"type":"bench.thread"' in line[:64]:
            written += 1
        elif b'"name":"ntcore_events_dropped_total"' in line:
            m = json.loads(line)  # a counter: its last line holds the total
            drops[(m["labels"]["stage"], m["labels"].get("plugin", ""))] = int(m["value"])
t0 = int(rep["read_start_ns"])
t1 = int(rep["read_end_ns"])
if end == "sink":
    for line in open(f"{T}/{name}.err"):
        m = re.search(r"\[sink:file\.0\] its thread consumed \d+ events from \d+ to (\d+) ns", line)
        if m:
            t1 = int(m[1])
rate = written / ((t1 - t0) / 1e9) / 1e6
lost = sum(drops.values())
stages = " + ".join(f"{k[0]} {v}" for k, v in sorted(drops.items())) or "none"
ok = produced == written + lost
print(f"{name:10} {rate:8.2f} M events/s written   produced {produced} = written {written}"
      f" + dropped {lost} ({stages}): {'exact' if ok else 'MISCOUNT'}")
sys.exit(0 if ok else 1)
PY
}

printf '%-10s %s\n' "path" "ring -> bus -> file sink (JSON Lines)"
run drain true $(( N * 176 / 1024 + 65536 )) "$SHM"
check drain "$SHM" sink || fail "drain: produced != written + dropped"
grep -q '"bench.thread"' "$SHM/drain.jsonl" || fail "drain: nothing written"
python3 -c "
import sys
r = dict(kv.split('=') for kv in open('$T/drain.report').read().split())
print(f\"{'':10} (the loop alone read the ring at {int(r['read']) / ((int(r['read_end_ns']) - int(r['read_start_ns'])) / 1e9) / 1e6:.1f} M records/s)\")"
lost=$(grep -c '"stage":"sink_queue"' "$SHM/drain.jsonl" || true)
rm -f "$SHM/drain.jsonl"
run sustained false 4096 "$T"
check sustained "$T" read || fail "sustained: produced != written + dropped"
