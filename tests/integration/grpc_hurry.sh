#!/bin/bash
# SPDX-License-Identifier: MIT
# A second SIGTERM cuts the gRPC sink's shutdown grace short. The collector
# is unreachable and shutdown_grace_ms is a minute: after the first SIGTERM
# the sink waits for it; a second SIGTERM must end the run at once (within
# 1.5 s), with every event it gave up counted (reason shutdown) and the
# file sink complete.
# Usage: grpc_hurry.sh BUILD_ROOT
set -euo pipefail
B=$(realpath "${1:?usage: grpc_hurry.sh BUILD_ROOT}")
S=$(realpath "$(dirname "$0")/../..")
T=$(mktemp -d /tmp/ntcore-grpc-hurry.XXXXXX)
NTPID=
cleanup() {
	[ -n "$NTPID" ] && kill -KILL "$NTPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
. "$S/tests/integration/grpc/lib.sh"
need_tools

K=400
cat >"$T/hurry.conf" <<C
plugins = (
  { plugin = "grpc_testgen"; count = $K; per_tick = 100; interval_ms = 10; },
  { plugin = "grpc"; endpoint = "127.0.0.1:1"; batch_timeout_ms = 100;
    shutdown_grace_ms = 60000; timeout_ms = 1000; },
  { plugin = "file"; path = "$T/events.jsonl"; }
);
C
"$NTCORE" -c "$T/hurry.conf" 2>"$T/ntcore.log" &
NTPID=$!
sleep 2.5
kill -TERM $NTPID
sleep 1
kill -0 $NTPID 2>/dev/null || { cat "$T/ntcore.log" >&2; fail "ntcore did not wait for the grace"; }
t0=$(date +%s%N)
kill -TERM $NTPID
for _ in $(seq 100); do kill -0 $NTPID 2>/dev/null || break; sleep 0.1; done
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
kill -0 $NTPID 2>/dev/null && { cat "$T/ntcore.log" >&2; fail "still running ${ms} ms after the second SIGTERM"; }
rc=0
wait $NTPID || rc=$?
NTPID=
[ $rc -eq 0 ] || { cat "$T/ntcore.log" >&2; fail "ntcore exited with $rc"; }
[ $ms -le 1500 ] || { cat "$T/ntcore.log" >&2; fail "the second SIGTERM took $ms ms"; }
grep -q "stopping at once (signal again): $K events not delivered to 127.0.0.1:1 (counted as reason=\"shutdown\")" "$T/ntcore.log" ||
	{ cat "$T/ntcore.log" >&2; fail "no count of the events given up"; }
read -r _ out dropped <<<"$(summary_of "$T/ntcore.log" grpc.0)"
[ "$dropped" = $K ] || { cat "$T/ntcore.log" >&2; fail "grpc.0 dropped $dropped, want $K"; }
n_file=$(grep -c '"type":"grpc_testgen.event"' "$T/events.jsonl" || true)
[ "$n_file" -eq $K ] || fail "the file sink got $n_file of $K events"
echo "ok: the second SIGTERM ended the run in $ms ms (grace 60000 ms); grpc dropped $K, counted; file sink $K/$K"
