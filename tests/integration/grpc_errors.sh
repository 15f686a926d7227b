#!/bin/bash
# SPDX-License-Identifier: MIT
# gRPC sink error handling.
#
# A. Bad config is refused at load with FILE:LINE: [grpc.0] key: reason and
#    exit status 2 (malformed endpoints, TLS options that contradict, a CA
#    file that cannot be read).
# B. At run time a collector that cannot be reached (refused port, a
#    TEST-NET address, a name that does not resolve) or fails TLS (a server
#    certificate from another CA; TLS spoken to a plaintext server) gives one
#    clear warning naming the endpoint and gRPC's reason, while the file sink
#    gets every event; SIGTERM ends the run within shutdown_grace_ms and the
#    undelivered events are counted as dropped. A flood against a refused
#    port keeps memory flat and holds exactly queue_size events.
# C. A collector that refuses with a permanent code (INVALID_ARGUMENT) gets
#    one error line, the batches are dropped (permanent_error) and not
#    retried; a partial success (rejected records) is counted as "rejected".
# Usage: grpc_errors.sh BUILD_ROOT
set -euo pipefail
B=$(realpath "${1:?usage: grpc_errors.sh BUILD_ROOT}")
S=$(realpath "$(dirname "$0")/../..")
T=$(mktemp -d /tmp/ntcore-grpc-err.XXXXXX)
RPID_tls= RPID_plain= RPID_perm= RPID_rej= NTPID=
cleanup() {
	for p in $RPID_tls $RPID_plain $RPID_perm $RPID_rej $NTPID; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [ -n "${KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
. "$S/tests/integration/grpc/lib.sh"
need_tools
command -v openssl >/dev/null || fail "openssl missing (Debian package openssl)"

# --- A. refused at load -------------------------------------------------------
# bad_config KEY EXPECTED_TEXT GRPC_KEYS...
bad_config() {
	local key=$1 want=$2
	shift 2
	{
		echo 'plugins = ('
		echo '  { plugin = "grpc";'
		for kv in "$@"; do echo "    $kv"; done
		echo '  },'
		echo "  { plugin = \"file\"; path = \"$T/never.jsonl\"; }"
		echo ');'
	} >"$T/bad.conf"
	local rc=0 line
	"$NTCORE" -c "$T/bad.conf" -d 1 >"$T/bad.out" 2>&1 || rc=$?
	line=$(line_of "$T/bad.conf" "$key")
	[ $rc -eq 2 ] || { cat "$T/bad.out" >&2; fail "[$*] exit $rc, want 2"; }
	grep -qF "$T/bad.conf:$line: [grpc.0] $key: " "$T/bad.out" ||
		{ cat "$T/bad.out" >&2; fail "[$*] no FILE:LINE message for $key (line $line)"; }
	grep -qF -- "$want" "$T/bad.out" || { cat "$T/bad.out" >&2; fail "[$*] message lacks \"$want\""; }
	echo "refused: $* -> $(grep -F "[grpc.0]" "$T/bad.out" | head -1 | sed "s|$T/||")"
}
bad_config endpoint 'missing port' 'endpoint = "localhost";'
bad_config endpoint 'out of range 1..65535' 'endpoint = "127.0.0.1:99999";'
bad_config endpoint 'IPv6 addresses must be in brackets' 'endpoint = "::1:4317";'
bad_config endpoint 'unknown scheme' 'endpoint = "grpc://collector:4317";'
bad_config endpoint 'must not have a path' 'endpoint = "http://collector:4318/v1/logs";'
bad_config tls 'contradicts the http://' 'endpoint = "http://collector:4317";' 'tls = true;'
bad_config ca_file 'TLS is off' 'endpoint = "collector:4317";' "ca_file = \"$T/none.pem\";"
bad_config ca_file 'cannot read' 'endpoint = "collector:4317";' 'tls = true;' "ca_file = \"$T/none.pem\";"
echo "not a certificate" >"$T/junk.pem"
bad_config ca_file 'holds no PEM certificate' 'endpoint = "collector:4317";' 'tls = true;' "ca_file = \"$T/junk.pem\";"
bad_config compression 'is not one of' 'compression = "zstd";'
bad_config batch_size 'exceeds queue_size' 'batch_size = 1000;' 'queue_size = 100;'

# --- B. unreachable, TLS failures --------------------------------------------
( cd "$T"
  for ca in ca1 ca2; do
	openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -out $ca.pem -days 2 \
		-subj "/CN=ntcore grpc test $ca" 2>/dev/null
  done
  openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=localhost" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >ext.cnf
  openssl x509 -req -in srv.csr -CA ca1.pem -CAkey ca1.key -CAcreateserial -out srv.pem \
	-days 2 -extfile ext.cnf 2>/dev/null ) || fail "cannot make test certificates"
start_receiver tls --tls-cert "$T/srv.pem" --tls-key "$T/srv.key"
start_receiver plain

K=400
GRACE=1500
# unreachable NAME EXPECTED_REGEX GRPC_KEYS...: run until SIGTERM, check.
unreachable() {
	local name=$1 want=$2
	shift 2
	{
		echo 'plugins = ('
		echo "  { plugin = \"grpc_testgen\"; count = $K; per_tick = 100; interval_ms = 10; },"
		echo "  { plugin = \"grpc\"; batch_timeout_ms = 100; shutdown_grace_ms = $GRACE; timeout_ms = 1000;"
		for kv in "$@"; do echo "    $kv"; done
		echo '  },'
		echo "  { plugin = \"file\"; path = \"$T/$name.jsonl\"; }"
		echo ');'
	} >"$T/$name.conf"
	"$NTCORE" -c "$T/$name.conf" 2>"$T/$name.log" &
	NTPID=$!
	sleep 2.5
	local t0 t1 rc=0
	t0=$(date +%s%N)
	kill -TERM $NTPID
	wait $NTPID || rc=$?
	t1=$(date +%s%N)
	NTPID=
	local ms=$(((t1 - t0) / 1000000))
	[ $rc -eq 0 ] || { cat "$T/$name.log" >&2; fail "$name: ntcore exited with $rc"; }
	[ $ms -le $((GRACE + 1500)) ] || fail "$name: SIGTERM took $ms ms (grace $GRACE ms)"
	grep -E -q "$want" "$T/$name.log" || { cat "$T/$name.log" >&2; fail "$name: no clear message matching /$want/"; }
	local n_file
	n_file=$(grep -c '"type":"grpc_testgen.event"' "$T/$name.jsonl" || true)
	[ "$n_file" -eq $K ] || fail "$name: the file sink got $n_file of $K events"
	read -r _ out dropped <<<"$(summary_of "$T/$name.log" grpc.0)"
	[ "$dropped" = $K ] || { cat "$T/$name.log" >&2; fail "$name: grpc.0 dropped $dropped, want $K"; }
	grep -q "$K events not delivered .*reason=\"shutdown\"" "$T/$name.log" ||
		fail "$name: the shutdown drop was not reported"
	echo "$name: stopped in $ms ms; file sink $K/$K; grpc dropped $K; said: $(grep -o 'cannot export events.*; retrying' "$T/$name.log" | head -1 | cut -c1-230)"
}
unreachable refused 'cannot export events to collector at 127\.0\.0\.1:1: UNAVAILABLE: .*(refused|connect)' \
	'endpoint = "127.0.0.1:1";'
unreachable testnet 'cannot export events to collector at 192\.0\.2\.1:4317: (UNAVAILABLE|DEADLINE_EXCEEDED): ' \
	'endpoint = "192.0.2.1:4317";'
unreachable nxdomain 'cannot export events to collector at no-such-host\.invalid:4317: (UNAVAILABLE|DEADLINE_EXCEEDED): .*(DNS|resol)' \
	'endpoint = "no-such-host.invalid:4317";'
unreachable tls_wrong_ca 'cannot export events to collector at 127.0.0.1:[0-9]+: UNAVAILABLE: .*(certificate verify failed|CERTIFICATE_VERIFY_FAILED)' \
	"endpoint = \"https://127.0.0.1:$PORT_tls\";" "ca_file = \"$T/ca2.pem\";"
unreachable tls_to_plain 'cannot export events to collector at 127\.0\.0\.1:[0-9]+: UNAVAILABLE: .*(Ssl handshake failed|SSL|ssl)' \
	"endpoint = \"127.0.0.1:$PORT_plain\";" 'tls = true;' "ca_file = \"$T/ca1.pem\";"
[ "$(count_logs "$T/tls.jsonl")" = 0 ] || fail "the TLS receiver accepted records from an unverified client"
stop_receiver tls
stop_receiver plain

# A flood while the collector is down: memory stays flat once the queue is
# full, exactly queue_size events are held (and dropped at shutdown), every
# other one is counted as queue_full.
KF=60000
QF=5000
cat >"$T/flood.conf" <<EOF
plugins = (
  { plugin = "grpc_testgen"; count = $KF; per_tick = 600; interval_ms = 10; },
  { plugin = "grpc"; endpoint = "127.0.0.1:1"; queue_size = $QF; shutdown_grace_ms = 500; },
  { plugin = "file"; path = "$T/flood_metrics.jsonl"; events = [ ]; metrics = true; interval_ms = 1000; }
);
EOF
"$NTCORE" -c "$T/flood.conf" 2>"$T/flood.log" &
NTPID=$!
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$NTPID/status"; }
sleep 0.4
rss_early=$(rss)
for _ in $(seq 100); do
	grep -q "published all $KF events" "$T/flood.log" && break
	sleep 0.1
done
sleep 0.5
rss_late=$(rss)
kill -TERM $NTPID
rc=0
wait $NTPID || rc=$?
NTPID=
[ $rc -eq 0 ] || { cat "$T/flood.log" >&2; fail "flood: ntcore exited with $rc"; }
grep -q "published all $KF events" "$T/flood.log" || fail "flood: generator did not finish"
[ $((rss_late - rss_early)) -lt 2048 ] ||
	fail "flood: RSS grew from $rss_early to $rss_late KiB while the collector was down"
read -r _ out dropped <<<"$(summary_of "$T/flood.log" grpc.0)"
[ "$dropped" = $KF ] || fail "flood: grpc.0 dropped $dropped, want $KF"
read -r qfull shut <<<"$($PY - "$T/flood_metrics.jsonl" <<'EOF'
import json, sys
last = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("name") == "ntcore_grpc_events_dropped_total":
        last[e["labels"]["reason"]] = e["value"]
print(int(last["queue_full"]), int(last["shutdown"]))
EOF
)"
[ "$qfull" = $((KF - QF)) ] && [ "$shut" = $QF ] ||
	fail "flood: dropped queue_full=$qfull shutdown=$shut, want $((KF - QF)) and $QF"
echo "flood: $KF events against a refused port: RSS ${rss_early} -> ${rss_late} KiB once full; queue_full $qfull, shutdown $shut (= queue_size)"

# --- C. permanent errors, partial success --------------------------------------
start_receiver perm --fail-code 3
cat >"$T/perm.conf" <<EOF
plugins = (
  { plugin = "grpc_testgen"; count = $K; per_tick = 50; interval_ms = 10; },
  { plugin = "grpc"; endpoint = "127.0.0.1:$PORT_perm"; batch_size = 50; batch_timeout_ms = 50; },
  { plugin = "file"; path = "$T/perm_events.jsonl"; }
);
EOF
rc=0
"$NTCORE" -c "$T/perm.conf" -d 2 2>"$T/perm.log" || rc=$?
[ $rc -eq 0 ] || { cat "$T/perm.log" >&2; fail "permanent: ntcore exited with $rc"; }
stop_receiver perm
n=$(grep -c "refused the export with a permanent error: INVALID_ARGUMENT: receiver configured to fail with 3" "$T/perm.log" || true)
[ "$n" = 1 ] || { cat "$T/perm.log" >&2; fail "permanent error logged $n times, want once"; }
if grep -q "retrying" "$T/perm.log"; then fail "a permanent error was retried"; fi
read -r _ out dropped <<<"$(summary_of "$T/perm.log" grpc.0)"
[ "$dropped" = $K ] || fail "permanent: grpc.0 dropped $dropped, want $K"
reqs=$(grep -c '"kind": "request"' "$T/perm.jsonl" || true)
[ "$reqs" = 0 ] || fail "permanent: receiver recorded $reqs accepted requests"
n_file=$(grep -c '"type":"grpc_testgen.event"' "$T/perm_events.jsonl" || true)
[ "$n_file" -eq $K ] || fail "permanent: the file sink got $n_file of $K events"
perm_dropped=$($PY "$CHECK" metric "$T/perm.jsonl" ntcore_grpc_events_dropped_total instance=grpc.0 reason=permanent_error)
[ "$perm_dropped" = "$K.0" ] || fail "permanent: metric says $perm_dropped dropped, want $K"
echo "permanent: one error line, $K events dropped as permanent_error, no retry; file sink $K/$K"

start_receiver rej --reject 1
sed "s/127.0.0.1:$PORT_perm/127.0.0.1:$PORT_rej/; s|perm_events|rej_events|" "$T/perm.conf" >"$T/rej.conf"
rc=0
"$NTCORE" -c "$T/rej.conf" -d 2 2>"$T/rej.log" || rc=$?
[ $rc -eq 0 ] || { cat "$T/rej.log" >&2; fail "rejected: ntcore exited with $rc"; }
stop_receiver rej
reqs=$(grep -c '"kind": "request"' "$T/rej.jsonl" || true)
rej=$($PY "$CHECK" metric "$T/rej.jsonl" ntcore_grpc_events_dropped_total instance=grpc.0 reason=rejected)
sent=$($PY "$CHECK" metric "$T/rej.jsonl" ntcore_grpc_events_sent_total instance=grpc.0)
[ "$rej" = "$reqs.0" ] || fail "rejected: metric $rej, want one per request ($reqs)"
[ "$sent" = "$((K - reqs)).0" ] || fail "rejected: sent $sent, want $((K - reqs))"
n=$(grep -c "rejected 1 of .* events: receiver rejects 1 per request" "$T/rej.log" || true)
[ "$n" = 1 ] || { cat "$T/rej.log" >&2; fail "partial success logged $n times, want once"; }
echo "rejected: $reqs requests, $rej rejected, $sent sent, one warning"
echo "PASS"
