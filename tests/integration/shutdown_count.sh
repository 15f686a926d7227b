#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Nothing lost at shutdown (issue 18): a producer writes records into a BPF
# ring without pause (the bench_ring probe's BPF program, run from a thread
# of its own) while the run ends. The core must stop the producers before
# its last read of the rings, so that every record written is read or
# counted: produced = read + dropped in the ring, and the file sink's lines
# + its drops = read. Before, the rings were read, then the probes were
# detached: what was written in between was neither delivered nor counted.
# Also times the shutdown (SIGTERM to exit).
# usage: shutdown_count.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
export NTCORE_PLUGIN_PATH=$NTCORE_PLUGIN_PATH:$B/bench
[ -f "$B/bench/bench_ring.so" ] || fail "not built: $B/bench/bench_ring.so"
nt_test_tmp nt-shutcount

for run in 1 2 3; do
	cat >"$T/s.conf" <<C
plugins = (
  { plugin = "bench_ring"; count = 1000000000; burst = 500; pause_us = 1000;
    ring_mb = 64; stop_when_done = false; report = "$T/ring.txt"; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; max_size_mb = 0; }
);
C
	rm -f "$T/out.jsonl"
	"$NTCORE" -c "$T/s.conf" >"$T/stdout" 2>"$T/stderr" &
	pid=$!
	sleep 1.5
	python3 - "$pid" "$T/shut_ms" <<'PY'
import os, signal, sys, time
pid = int(sys.argv[1])
t0 = time.monotonic()
os.kill(pid, signal.SIGTERM)
while True:  # the shell reaps it; poll until it is gone
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(") ")[1].startswith("Z"):
                break
    except (ProcessLookupError, FileNotFoundError):
        break
    time.sleep(0.001)
open(sys.argv[2], "w").write(f"{(time.monotonic() - t0) * 1000:.0f}")
PY
	wait "$pid" || fail "ntcore exited $?: $(tail -3 "$T/stderr")"
	python3 - "$T" "$run" <<'PY' || fail "run $run: see above"
import json, sys
T, run = sys.argv[1], sys.argv[2]
r = dict(kv.split("=") for kv in open(f"{T}/ring.txt").read().split())
produced, read, bpf = int(r["produced"]), int(r["read"]), int(r["bpf_dropped"])
lines, drops = 0, 0
for line in open(f"{T}/out.jsonl", "rb"):
    if b'"type":"bench.thread"' in line[:64]:
        lines += 1
    elif b'"ntcore_events_dropped_total"' in line:
        m = json.loads(line)
        if m["labels"]["plugin"] == "file.0":
            drops += int(m["value"])
bad = []
if produced != read + bpf:
    bad.append(f"produced {produced} != read {read} + dropped in the ring {bpf}:"
               f" {produced - read - bpf} records neither read nor counted")
if read != lines + drops:
    bad.append(f"read {read} != written {lines} + dropped by the file sink {drops}")
if produced < 50000:
    bad.append(f"only {produced} records produced: the test needs a busy ring")
shut = open(f"{T}/shut_ms").read()
for b in bad:
    print("  " + b)
print(f"run {run}: produced {produced} = read {read} + ring drops {bpf}; "
      f"file {lines} + drops {drops}; shutdown {shut} ms")
sys.exit(1 if bad else 0)
PY
done
echo "shutdown_count.sh: ok"
