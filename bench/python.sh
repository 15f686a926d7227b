#!/bin/bash
# bench/python.sh [--smoke] [BUILD_ROOT]
#
# Cost of the python probe's sampler on a CPU-bound Python workload
# (bench/python/work.py under Debian's python3.11: a 24-deep call chain),
# measured side by side in one run (modes interleaved, median of the
# repetitions; the workload times itself once the profiler is attached):
#   base        the workload alone
#   ntcore      ntcore -c (python probe at F Hz, idle = true) -- workload
#   ntcore-hi   the same at 10 x F, to make the cost visible above noise
#   peer        a py-spy-like sampler from Debian's packages at F Hz when one
#               can read this interpreter (Debian's austin 1.0.1 cannot read
#               3.11); otherwise bcc's profile tool (profile-bpfcc -F F -p
#               PID), and where bcc cannot compile (no kernel headers, as on
#               kernels without kheaders) bpftrace's equivalent of it:
#               profile:hz:F /pid == PID/ { @[ustack] = count(); }
#   peer-hi     the peer at 10 x F
# and prints each mode's time over base, and the in-kernel cost of one
# sample (BPF program run time / runs, from kernel.bpf_stats_enabled, set to
# 1 for the run and put back after) for ntcore's py_sample and the peer's
# program. F is 99 (the probe's default).
#
# --smoke: one short repetition (< 30 s), peer bpftrace; CI runs only this.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_bench_init python 22 "$@"
PY=/usr/bin/python3.11
F=99
[ -x "$PY" ] || fail "needs Debian's $PY"
if [ "$SMOKE" -eq 1 ]; then
	ROUNDS=8000 REPS=1 MODES="base ntcore ntcore-hi peer"
else
	ROUNDS=20000 REPS=5 MODES="base ntcore ntcore-hi peer peer-hi"
fi

T=$(mktemp -d /tmp/ntcore-bench-python.XXXXXX)
BG=
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo "")
cleanup() {
	[ -n "$BG" ] && kill -INT "$BG" 2>/dev/null && wait "$BG" 2>/dev/null
	[ -n "$STATS_WAS" ] && sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"
	rm -rf "$T"
}
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1
cp "$ROOT/bench/python/work.py" "$T/"

# The peer: austin when it reads this interpreter, else bcc's profile.
PEER=
if command -v austin >/dev/null; then
	cat >"$T/spin.py" <<'PYS'
import time
def spin():
    e = time.time() + 0.5
    while time.time() < e: pass
spin()
PYS
	if timeout 10 austin -i 1000 "$PY" "$T/spin.py" 2>/dev/null | grep -q "spin"; then
		PEER=austin
	else
		echo "peer: austin (Debian) cannot read CPython 3.11 here ($(austin -i 1000 "$PY" "$T/spin.py" 2>&1 | head -1)); using bcc's profile"
	fi
fi
# (--smoke skips bcc: compiling its program takes longer than the smoke's
# budget; bpftrace's profile probe does the same walk)
if [ -z "$PEER" ] && [ "$SMOKE" -eq 0 ] && command -v profile-bpfcc >/dev/null; then
	sleep 5 &
	s=$!
	if timeout 60 profile-bpfcc -F $F -p $s 1 >/dev/null 2>"$T/bcc.log"; then
		PEER=profile
	else
		echo "peer: bcc's profile cannot run here ($(grep -m1 -iE "unable|error|fatal" "$T/bcc.log" || echo "exit $?")); using bpftrace's profile probe"
	fi
	kill $s 2>/dev/null || true
	wait $s 2>/dev/null || true
fi
if [ -z "$PEER" ]; then
	command -v bpftrace >/dev/null || fail "no peer: no working austin, profile-bpfcc or bpftrace"
	PEER=bpftrace
fi

conf() {
	cat >"$T/py$1.conf" <<CONF
plugins = ( { plugin = "python"; required = true; frequency = $1; } );
CONF
}
conf $F
conf $((F * 10))

prog_stats() { # NAME -> "run_time_ns run_cnt" summed over programs of that name
	bpftool prog show -j 2>/dev/null | $PY -c "
import json, sys
t = c = 0
for p in json.load(sys.stdin):
    if p.get('name') == '$1':
        t += p.get('run_time_ns', 0); c += p.get('run_cnt', 0)
print(t, c)"
}

wait_for() { # FILE TEXT: up to 30 s
	for _ in $(seq 3000); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.01
	done
	cat "$1" >&2
	fail "timed out waiting for '$2' in $1"
}

# run MODE: the workload's seconds into time.MODE, the sampler's in-kernel
# time and runs over the timed part into cost.MODE
run() {
	local mode=$1 go=$T/go out=$T/out f=$F prog w
	rm -f "$go" "$out"
	case $mode in *-hi) f=$((F * 10)) ;; esac
	"$PY" "$T/work.py" "$ROUNDS" "$go" >"$out" &
	w=$!
	case $mode in
	base) ;;
	ntcore*)
		prog=py_sample
		"$NTCORE" -c "$T/py$f.conf" -p "$w" >/dev/null 2>"$T/nt.log" &
		BG=$!
		wait_for "$T/nt.log" "pid $w: CPython" ;;
	peer*)
		if [ "$PEER" = austin ]; then
			prog=
			austin -i $((1000000 / f)) -p "$w" >/dev/null 2>"$T/peer.log" &
			BG=$!
			sleep 0.5
		elif [ "$PEER" = profile ]; then
			prog=do_perf_event
			profile-bpfcc -F "$f" -p "$w" -f >/dev/null 2>"$T/peer.log" &
			BG=$!
			for _ in $(seq 3000); do
				bpftool prog show 2>/dev/null | grep -q "name $prog" && break
				sleep 0.01
			done
		else
			prog=$f
			bpftrace -e "profile:hz:$f /pid == $w/ { @[ustack] = count(); }" >"$T/peer.log" 2>&1 &
			BG=$!
			wait_for "$T/peer.log" "Attaching"
			sleep 0.2
		fi ;;
	esac
	local t0=0 c0=0 t1=0 c1=0
	[ -n "${prog:-}" ] && read -r t0 c0 < <(prog_stats "$prog")
	touch "$go"
	wait "$w"
	[ -n "${prog:-}" ] && read -r t1 c1 < <(prog_stats "$prog")
	if [ -n "$BG" ]; then
		kill -INT "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
		BG=
	fi
	[ "$mode" != base ] && echo "$((t1 - t0)) $((c1 - c0))" >>"$T/cost.$mode"
	cat "$out" >>"$T/time.$mode"
}

for r in $(seq "$REPS"); do
	for m in $MODES; do
		run "$m"
	done
done

median() { sort -g "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median "$T/time.base")
echo
echo "python bench: $PY, $ROUNDS rounds of a 24-deep call chain, $REPS repetition(s), F = $F Hz; peer: $PEER"
printf "%-10s %10s %9s %14s %10s\n" mode seconds "x base" "ns/sample" samples
for m in $MODES; do
	t=$(median "$T/time.$m")
	if [ -f "$T/cost.$m" ] && [ "$(awk '{c+=$2} END {print c+0}' "$T/cost.$m")" -gt 0 ]; then
		read -r ns cnt < <(awk '{t+=$1; c+=$2} END {print t, c}' "$T/cost.$m")
		per=$(awk -v t="$ns" -v c="$cnt" 'BEGIN {printf (c ? "%.0f" : "-"), (c ? t / c : 0)}')
	else
		per=- cnt=-
	fi
	printf "%-10s %10.3f %9.4f %14s %10s\n" "$m" "$t" "$(awk -v a="$t" -v b="$base" 'BEGIN {print a / b}')" "$per" "$cnt"
done
echo "(ns/sample: in-kernel run time of the sampling program per run; ntcore's walks the"
echo " Python frames and writes a record; the peer's walks the native user stack into a map."
echo " ntcore-hi/peer-hi run at $((F * 10)) Hz.)"
