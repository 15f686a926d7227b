#!/bin/bash
# SPDX-License-Identifier: MIT
# gRPC sink fault test: the collector goes away mid-run and comes back.
#
# grpc_testgen publishes K events at a steady 2000/s. Once the first receiver
# has some of them it is stopped (gracefully: calls in flight complete), and a
# second receiver is started on the same port 1.5 s later. With queue_size
# far below what 1.5 s of events needs, the sink must drop the excess and
# count it (ntcore_grpc_events_dropped_total{reason="queue_full"}, and the
# core's drop counter in the summary), retry the rest with backoff, and
# deliver every event it did not drop exactly once: received (both receivers,
# no duplicate) + dropped = K. Memory stays bounded: the queue gauge never
# exceeds queue_size.
# Usage: grpc_fault.sh BUILD_ROOT
set -euo pipefail
B=$(realpath "${1:?usage: grpc_fault.sh BUILD_ROOT}")
S=$(realpath "$(dirname "$0")/../..")
T=$(mktemp -d /tmp/ntcore-grpc-fault.XXXXXX)
RPID_r1= RPID_r2= NTPID=
cleanup() {
	for p in $RPID_r1 $RPID_r2 $NTPID; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -n "${KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
. "$S/tests/integration/grpc/lib.sh"
need_tools

K=8000
QUEUE=400
start_receiver r1
PORT=$PORT_r1
cat >"$T/fault.conf" <<EOF
plugins = (
  { plugin = "grpc_testgen"; count = $K; per_tick = 20; interval_ms = 10; },
  { plugin = "grpc"; log_level = "debug"; endpoint = "127.0.0.1:$PORT"; queue_size = $QUEUE;
    batch_size = 100; batch_timeout_ms = 50; retry_initial_ms = 50;
    retry_max_ms = 300; metrics_interval_ms = 300; shutdown_grace_ms = 5000; },
  { plugin = "file"; path = "$T/events.jsonl"; }
);
EOF
"$NTCORE" -c "$T/fault.conf" -d 7 2>"$T/ntcore.log" &
NTPID=$!

# wait until the collector got a first share, then take it away
for _ in $(seq 100); do
	[ "$(count_logs "$T/r1.jsonl")" -ge 1000 ] && break
	sleep 0.05
done
[ "$(count_logs "$T/r1.jsonl")" -ge 1000 ] || { cat "$T/ntcore.log" >&2; fail "first receiver got too little"; }
stop_receiver r1
echo "receiver stopped after $(count_logs "$T/r1.jsonl") records"
sleep 1.5
start_receiver r2 --port "$PORT"
echo "receiver restarted on port $PORT"

rc=0
wait $NTPID || rc=$?
NTPID=
[ $rc -eq 0 ] || { cat "$T/ntcore.log" >&2; fail "ntcore exited with $rc"; }
stop_receiver r2

grep -q "published all $K events" "$T/ntcore.log" || fail "generator did not finish"
grep -E -q "cannot export (events|metrics) to collector at 127.0.0.1:$PORT: [A-Z_]+: " "$T/ntcore.log" ||
	{ cat "$T/ntcore.log" >&2; fail "the outage was not reported"; }
grep -q "reachable again" "$T/ntcore.log" || { cat "$T/ntcore.log" >&2; fail "the recovery was not reported"; }
read -r received dropped retried qmax first <<<"$($PY "$CHECK" fault $K "$T/r1.jsonl" "$T/r2.jsonl")" ||
	{ tail -20 "$T/ntcore.log" >&2; fail "receiver content"; }
[ "$qmax" -le $QUEUE ] || fail "queue gauge reached $qmax > queue_size $QUEUE"
read -r _ out sdropped <<<"$(summary_of "$T/ntcore.log" grpc.0)"
[ "$sdropped" = "$dropped" ] || fail "summary says grpc.0 dropped $sdropped, metric says $dropped"
n_file=$(grep -c '"type":"grpc_testgen.event"' "$T/events.jsonl" || true)
[ "$n_file" -eq $K ] || fail "file sink wrote $n_file events, want $K (it must not be affected)"
echo "K=$K: first receiver $first, both $received, dropped (queue_full) $dropped, retried sends $retried, queue max $qmax <= $QUEUE"
echo "PASS"
