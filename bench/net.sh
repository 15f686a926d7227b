#!/bin/bash
# bench/net.sh [--smoke] [BUILD_ROOT]
#
# Cost of the net probe on a syscall-heavy workload, measured side by side in
# one run (modes interleaved, median of the repetitions):
#   base      bench/net/netbench alone: a client and a server process
#             exchanging 64-byte messages over loopback TCP (then UDP), one
#             send and one recv per message on each side (4 socket syscalls
#             a round, each one a sock_send_length/sock_recv_length hit)
#   ntcore    ntcore host-wide in the background (net probe with its default
#             config + the file sink with metrics), netbench beside it
#   bpftrace  the bpftrace one-liner that does what tcptop does, on the same
#             tracepoints, host-wide:
#               tracepoint:sock:sock_send_length /args->ret > 0/
#                 { @tx[pid, comm] = sum(args->ret); }
#               tracepoint:sock:sock_recv_length /args->ret > 0/
#                 { @rx[pid, comm] = sum(args->ret); }
#   tcptop    tcptop-bpfcc from Debian's bpfcc-tools, when it can run (it
#             needs kprobes and kernel headers; the reason is printed if not)
# It prints each mode's run time over base and the in-kernel cost of one
# program run (ns) from the kernel's BPF statistics (kernel.bpf_stats_enabled
# is set to 1 for the run and put back after). On a shared machine the
# run-time ratios wander by a few percent; the per-run cost does not.
#
# --smoke: one short repetition (< 30 s); CI runs only this.
set -euo pipefail

SMOKE=0
B=
for a in "$@"; do
	case $a in
	--smoke) SMOKE=1 ;;
	-h | --help) sed -n '2,25p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
NTCORE=$B/core/ntcore
fail() { echo "bench/net: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root"
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (pass the build root)"
[ -f "$B/plugins/net/net.so" ] || fail "no $B/plugins/net/net.so"
command -v cc >/dev/null || fail "needs a C compiler (cc)"
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks

if [ "$SMOKE" -eq 1 ]; then
	TCP_ROUNDS=20000 UDP_ROUNDS=5000 REPS=1
else
	TCP_ROUNDS=150000 UDP_ROUNDS=40000 REPS=5
fi
HAVE_BPFTRACE=1
command -v bpftrace >/dev/null || HAVE_BPFTRACE=0

T=$(mktemp -d /tmp/ntcore-bench-net.XXXXXX)
BG=
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo "")
cleanup() {
	if [ -n "$BG" ]; then
		kill -INT "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
	fi
	[ -n "$STATS_WAS" ] && sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
	rm -rf "$T"
}
trap cleanup EXIT
[ -n "$STATS_WAS" ] && sysctl -qw kernel.bpf_stats_enabled=1

cc -O2 -o "$T/netbench" "$ROOT/bench/net/netbench.c" || fail "cannot build netbench"
cat >"$T/net.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "net"; },
  { plugin = "file"; path = "$T/events.jsonl"; metrics = true; }
);
EOF
cat >"$T/net.bt" <<'EOF'
tracepoint:sock:sock_send_length /args->ret > 0/ { @tx[pid, comm] = sum(args->ret); }
tracepoint:sock:sock_recv_length /args->ret > 0/ { @rx[pid, comm] = sum(args->ret); }
EOF

# start_bg LOG READY_PATTERN CMD...: start a tracer, wait until it is ready.
start_bg() {
	local log=$1 ready=$2
	shift 2
	"$@" >"$log" 2>&1 &
	BG=$!
	for _ in $(seq 200); do
		grep -q "$ready" "$log" && return 0
		kill -0 "$BG" 2>/dev/null || break
		sleep 0.05
	done
	cat "$log" >&2
	fail "$1 did not get ready"
}
stop_bg() {
	kill -INT "$BG" 2>/dev/null || true
	wait "$BG" 2>/dev/null || true
	BG=
}

# BPF program stats "name run_cnt run_time_ns" for programs named like $1.
prog_stats() {
	bpftool -j prog show 2>/dev/null | python3 -c '
import json, re, sys
pat = re.compile(sys.argv[1])
for p in json.load(sys.stdin):
    if pat.search(p.get("name", "")):
        print(p.get("name"), p.get("run_cnt", 0), p.get("run_time_ns", 0))
' "$1"
}
COST="$T/cost"
: >"$COST"
record_cost() { # MODE REGEX
	prog_stats "$2" | while read -r name cnt ns; do
		echo "$1 $name $cnt $ns" >>"$COST"
	done
}

TCPTOP_WHY=
if command -v tcptop-bpfcc >/dev/null; then
	if ! timeout 20 tcptop-bpfcc -C 1 1 >"$T/tcptop.try" 2>&1; then
		TCPTOP_WHY=$(grep -m1 -E "rror|Unable|Exception|cannot" "$T/tcptop.try" || tail -1 "$T/tcptop.try")
	fi
else
	TCPTOP_WHY="tcptop-bpfcc not installed"
fi

run_mode() { # MODE PROTO ROUNDS -> seconds on stdout
	local mode=$1 proto=$2 rounds=$3 t
	case $mode in
	base) ;;
	ntcore) start_bg "$T/ntcore.log" "tracing" "$NTCORE" -c "$T/net.conf" ;;
	bpftrace) start_bg "$T/bpftrace.log" "Attaching" bpftrace "$T/net.bt" ;;
	tcptop) start_bg "$T/tcptop.log" "" tcptop-bpfcc -C 3600 1 && sleep 3 ;;
	esac
	t=$("$T/netbench" "$proto" "$rounds" 64)
	case $mode in
	ntcore) record_cost ntcore '^net_(send|recv|data_ready|state|retransmit|reset_sent|reset_recv)$' ;;
	bpftrace) record_cost bpftrace '^sock_(send|recv)_lengt' ;;
	esac
	[ "$mode" = base ] || stop_bg
	echo "$t"
}

MODES="base ntcore"
[ "$HAVE_BPFTRACE" -eq 1 ] && MODES="$MODES bpftrace"
[ -z "$TCPTOP_WHY" ] && MODES="$MODES tcptop"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "bench/net: loopback 64-byte request/response, $REPS repetition(s), modes interleaved, median"
for proto in tcp udp; do
	rounds=$TCP_ROUNDS
	[ "$proto" = udp ] && rounds=$UDP_ROUNDS
	for r in $(seq "$REPS"); do
		for m in $MODES; do
			echo "$m $(run_mode "$m" "$proto" "$rounds")" >>"$T/times.$proto"
		done
	done
	base=$(awk '$1=="base"{print $2}' "$T/times.$proto" | median)
	printf "  %s, %d rounds (%d socket syscalls):\n" "$proto" "$rounds" $((rounds * 4))
	printf "    %-10s %10s %8s %14s\n" mode time_s ratio "ns/syscall+"
	for m in $MODES; do
		t=$(awk -v m="$m" '$1==m{print $2}' "$T/times.$proto" | median)
		awk -v m="$m" -v t="$t" -v b="$base" -v n=$((rounds * 4)) \
			'BEGIN {printf "    %-10s %10.3f %8.3f %14.0f\n", m, t, t / b, (t - b) * 1e9 / n}'
	done
done
[ -n "$TCPTOP_WHY" ] && echo "  tcptop-bpfcc: not run: $TCPTOP_WHY"

if [ -n "$STATS_WAS" ] && [ -s "$COST" ]; then
	echo "  in-kernel cost of one program run (kernel.bpf_stats_enabled):"
	awk '{cnt[$1" "$2]+=$3; ns[$1" "$2]+=$4}
	     END {for (k in cnt) if (cnt[k]) printf "    %-28s %10d runs %8.0f ns/run\n", k, cnt[k], ns[k]/cnt[k]}' "$COST" | sort
fi
