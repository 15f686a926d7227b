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

. "$(dirname "$0")/lib.sh"
nt_bench_init net 25 "$@"
command -v cc >/dev/null || fail "needs a C compiler (cc)"

if [ "$SMOKE" -eq 1 ]; then
	TCP_ROUNDS=20000 UDP_ROUNDS=5000 REPS=1
else
	TCP_ROUNDS=150000 UDP_ROUNDS=40000 REPS=5
fi
HAVE_BPFTRACE=1
command -v bpftrace >/dev/null || HAVE_BPFTRACE=0

nt_bench_tmp
nt_bench_stats_on || true

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
