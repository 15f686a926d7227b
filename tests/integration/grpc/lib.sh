# SPDX-License-Identifier: MIT
# Shared helpers of the gRPC sink's integration tests (sourced, not run).
# Expects: B (build root), S (source root), T (scratch dir, removed on exit).

PY=/usr/bin/python3     # Debian's python3: python3-grpcio, python3-protobuf
RECV="$S/tests/integration/grpc/otlp_receiver.py"
CHECK="$S/tests/integration/grpc/check_otlp.py"
PROTO="$S/sinks/grpc/proto"
NTCORE="$B/core/ntcore"
export NTCORE_PLUGIN_PATH="$B/sinks"

fail() { echo "FAIL: $*" >&2; exit 1; }

need_tools() {
	[ -x "$NTCORE" ] || fail "$NTCORE not built"
	[ -f "$B/sinks/grpc/grpc.so" ] || fail "grpc.so not built in $B/sinks/grpc"
	[ -f "$B/sinks/grpc/grpc_testgen.so" ] || fail "grpc_testgen.so not built"
	command -v protoc >/dev/null || fail "protoc missing (Debian package protobuf-compiler)"
	$PY -c 'import grpc, google.protobuf' 2>/dev/null ||
		fail "$PY lacks grpc/protobuf (Debian packages python3-grpcio python3-protobuf)"
}

# start_receiver NAME [receiver args...]: starts it, sets RPID_<NAME> and
# PORT_<NAME>; the receiver's JSON lines go to $T/NAME.jsonl.
start_receiver() {
	local name=$1
	shift
	rm -f "$T/$name.port"
	$PY "$RECV" --proto "$PROTO" --port-file "$T/$name.port" \
		--out "$T/$name.jsonl" "$@" 2>"$T/$name.err" &
	local pid=$!
	for _ in $(seq 100); do
		[ -s "$T/$name.port" ] && break
		kill -0 $pid 2>/dev/null || { cat "$T/$name.err" >&2; fail "receiver $name died"; }
		sleep 0.1
	done
	[ -s "$T/$name.port" ] || fail "receiver $name did not start"
	eval "RPID_$name=$pid"
	eval "PORT_$name=$(cat "$T/$name.port")"
}

# stop_receiver NAME: graceful stop (calls in flight complete), wait.
stop_receiver() {
	local pid
	eval "pid=\$RPID_$1"
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# count_logs FILE: log records a receiver wrote so far.
count_logs() { grep -c '"kind": "log"' "$1" 2>/dev/null || true; }

# The config's 1-based line holding `key =` for the first time.
line_of() { grep -n "$2 *=" "$1" | head -1 | cut -d: -f1; }

# Summary line of an instance: "in out dropped".
summary_of() {
	awk -v n="$2" '$1 == n && NF >= 6 { print $4, $5, $6 }' "$1" | tail -1
}
