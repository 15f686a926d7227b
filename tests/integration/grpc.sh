#!/bin/bash
# SPDX-License-Identifier: MIT
# gRPC (OTLP) sink, end to end against an independent receiver
# (tests/integration/grpc/otlp_receiver.py: python3-grpcio + classes that
# protoc generates from the same .proto field numbers).
#
# 1. A known workload (grpc_testgen: K events whose every field follows from
#    its seq, plus counters, a labelled counter, a gauge and a histogram)
#    goes through ntcore's grpc sink and the file sink. The receiver must see
#    exactly K log records, in order, each with exactly the expected
#    attributes (types included), the resource naming this host and this
#    ntcore instance, and metric points with the exact final values.
# 2. The same over TLS (a CA made here, https:// endpoint) with gzip.
# Usage: grpc.sh BUILD_ROOT
set -euo pipefail
B=$(realpath "${1:?usage: grpc.sh BUILD_ROOT}")
S=$(realpath "$(dirname "$0")/../..")
T=$(mktemp -d /tmp/ntcore-grpc.XXXXXX)
RPID_plain= RPID_tls=
cleanup() {
	for p in $RPID_plain $RPID_tls; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
. "$S/tests/integration/grpc/lib.sh"
need_tools

# --- 1. plain, exact content ------------------------------------------------
K=5000
BATCH=300
start_receiver plain
cat >"$T/plain.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "grpc_testgen"; count = $K; per_tick = 250; interval_ms = 10; },
  { plugin = "grpc"; endpoint = "127.0.0.1:$PORT_plain"; batch_size = $BATCH;
    batch_timeout_ms = 100; metrics_interval_ms = 500; },
  { plugin = "file"; path = "$T/events.jsonl"; }
);
EOF
"$NTCORE" -c "$T/plain.conf" -d 3 2>"$T/plain.log" &
NTPID=$!
rc=0
wait $NTPID || rc=$?
[ $rc -eq 0 ] || { cat "$T/plain.log" >&2; fail "ntcore exited with $rc"; }
stop_receiver plain
grep -q "published all $K events" "$T/plain.log" || { cat "$T/plain.log" >&2; fail "generator did not finish"; }
$PY "$CHECK" basic "$T/plain.jsonl" $K $NTPID "$(hostname)" $BATCH ||
	{ tail -20 "$T/plain.log" >&2; fail "receiver content"; }
n_file=$(grep -c '"type":"grpc_testgen.event"' "$T/events.jsonl" || true)
[ "$n_file" -eq $K ] || fail "file sink wrote $n_file events, want $K"
read -r _ out dropped <<<"$(summary_of "$T/plain.log" grpc.0)"
[ "$out" = $K ] && [ "$dropped" = 0 ] || fail "summary for grpc.0: out=$out dropped=$dropped"
echo "plain: $K events exported and checked field by field; file sink agrees"

# --- 2. TLS (own CA, https://) + gzip ---------------------------------------
command -v openssl >/dev/null || fail "openssl missing (Debian package openssl)"
( cd "$T"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
	-subj "/CN=ntcore grpc test CA" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr \
	-subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >ext.cnf
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
	-out srv.pem -days 2 -extfile ext.cnf 2>/dev/null ) || fail "cannot make test certificates"
K2=2000
# The endpoint is 127.0.0.1, checked against the certificate's IP SAN: a
# name lookup of "localhost" would need /etc/hosts, which a fresh Debian
# root (mmdebstrap, containers) may not have.
start_receiver tls --tls-cert "$T/srv.pem" --tls-key "$T/srv.key"
cat >"$T/tls.conf" <<EOF
plugins = (
  { plugin = "grpc_testgen"; count = $K2; per_tick = 200; interval_ms = 10; },
  { plugin = "grpc"; endpoint = "https://127.0.0.1:$PORT_tls"; ca_file = "$T/ca.pem";
    compression = "gzip"; batch_size = 256; batch_timeout_ms = 100; }
);
EOF
rc=0
"$NTCORE" -c "$T/tls.conf" -d 2 2>"$T/tls.log" || rc=$?
[ $rc -eq 0 ] || { cat "$T/tls.log" >&2; fail "ntcore (TLS) exited with $rc"; }
stop_receiver tls
grep -q "over TLS (ca_file)" "$T/tls.log" || { cat "$T/tls.log" >&2; fail "TLS not in use"; }
if grep -q "cannot export" "$T/tls.log"; then cat "$T/tls.log" >&2; fail "TLS export failed"; fi
$PY "$CHECK" count "$T/tls.jsonl" $K2 || fail "TLS receiver content"
echo "tls+gzip: $K2 events, each once"
echo "PASS"
