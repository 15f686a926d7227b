#!/bin/bash
# Integration test of the net probe (root, real kernel, loopback traffic).
#   tests/integration/net.sh BUILD_ROOT
# 1. TCP over IPv4: a transfer of exactly N bytes (N random, several MiB)
#    between two child processes is N bytes sent by the sender's pid and N
#    received by the receiver's pid on that connection, one net.open and one
#    net.conn per side, and the per-process metrics say the same.
# 2. The same over IPv6, and 3. a UDP exchange (stop and wait, exact counts).
# 4. Config errors: an unknown key, a bad port, nothing to trace -> FILE:LINE
#    message and exit 2.
# 5. A target given with -p exits mid-run: a message, the run goes on to its
#    -d end, exit 0, and the target's traffic is still in the output.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_init net "$@"
nt_test_tmp ntcore-net-test

conf() { # conf NAME [extra net keys]
	cat >"$T/$1.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "net"; report_interval_s = 0; ${2:-} },
  { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; }
);
EOF
}

transfer() { # transfer NAME tcp|udp NBYTES [--v6]
	local name=$1 proto=$2 n=$3
	shift 3
	conf "$name"
	timeout 60 "$NTCORE" -c "$T/$name.conf" -- \
		python3 "$HERE/net/xfer.py" "$proto" "$n" "$T/$name.json" "$@" \
		>"$T/$name.out" 2>&1 || { cat "$T/$name.out" >&2; fail "$name: ntcore exited with $?"; }
	python3 "$HERE/net/check.py" "$T/$name.json" "$T/$name.jsonl" "$@" ||
		{ cat "$T/$name.out" >&2; fail "$name: output does not match the transfer"; }
}

# --- 1-3: exact byte accounting ------------------------------------------
N=$(( (2 + RANDOM % 6) * 1048576 + RANDOM ))
transfer tcp4 tcp "$N"
N=$(( (1 + RANDOM % 4) * 1048576 + RANDOM ))
transfer tcp6 tcp "$N" --v6
N=$(( 1048576 + RANDOM * 16 + RANDOM % 8192 ))
transfer udp4 udp "$N"

# --- 4: config errors ------------------------------------------------------
expect_config_error unknown_key 'tpc = true;' "unknown key 'tpc'"
expect_config_error bad_port 'ports = [ "443", "http" ];' 'ports: "http" is not a port'
expect_config_error bad_range 'ports = [ "9000-8000" ];' 'ports: "9000-8000"'
expect_config_error nothing 'tcp = false; udp = false;' 'nothing to trace'
expect_config_error bad_type 'max_connections = "many";' 'max_connections'

# --- 5: a -p target that exits mid-run -------------------------------------
conf pexit
N=$(( 1048576 + RANDOM ))
expect_pexit "tracing" 5 python3 "$HERE/net/xfer.py" tcp "$N" "$T/pexit.json" --gate "$T/gate"
python3 "$HERE/net/check.py" "$T/pexit.json" "$T/pexit.jsonl" ||
	{ cat "$T/pexit.out" >&2; fail "pexit: the exited target's traffic is not in the output"; }
echo "net.sh: pexit: $(grep "target pid $XPID" "$T/pexit.out")"

echo "net.sh: PASS"
