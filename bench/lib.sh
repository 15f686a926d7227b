# SPDX-License-Identifier: MIT
# bench/lib.sh: what the probe benchmarks (bench/<name>.sh [--smoke]
# [BUILD_ROOT]) share. Source it after `set -euo pipefail`:
#
#   . "$(dirname "$0")/lib.sh"
#   nt_bench_init NAME HELP_LAST_LINE "$@"
#
# nt_bench_init parses --smoke (SMOKE=1) and -h/--help (prints lines
# 2..HELP_LAST_LINE of the script), takes the build root from the last other
# argument, $NTCORE_BUILD_ROOT or ROOT/build (B, absolute when it exists),
# sets ROOT (the source tree), NTCORE (the daemon) and NTCORE_PLUGIN_PATH,
# and fails unless it runs as root and the daemon and
# B/plugins/NAME/NAME.so are built. fail MSG prints "bench/NAME: MSG" and
# exits 1.
#
# nt_bench_tmp [SIGNAL]: T, a temporary folder, and BG, the pid of a
# background tracer (empty when none); at exit BG is stopped with SIGNAL
# (INT by default) and waited for, kernel.bpf_stats_enabled is put back if
# nt_bench_stats_on changed it, the script's bench_cleanup runs if it
# defines one, and T is removed. COST ($T/cost) collects record_cost lines.
#
# nt_bench_stats_on: kernel.bpf_stats_enabled = 1 for the run (per-program
# run counts and times); fails when the sysctl cannot be read.
#
# start_bg LOG READY_PATTERN CMD...: start a tracer in the background (BG),
# wait until LOG shows READY_PATTERN (up to 10 s). stop_bg: SIGINT, wait.
# prog_stats REGEX: "name run_cnt run_time_ns" of the loaded BPF programs
# named like REGEX. record_cost MODE REGEX: append "MODE name cnt ns" to COST.
# median: the median of the numbers on stdin (mean of the middle two when
# their count is even).

fail() { echo "${NT_BENCH:-bench}: $*" >&2; exit 1; }

nt_bench_init() { # NAME HELP_LAST_LINE ARGS...
	local name=$1 help=$2 a
	shift 2
	NT_BENCH=bench/$name
	NT_BENCH_NAME=$name
	SMOKE=0
	B=
	for a in "$@"; do
		case $a in
		--smoke) SMOKE=1 ;;
		-h | --help) sed -n "2,${help}p" "$0"; exit 0 ;;
		*) B=$a ;;
		esac
	done
	ROOT=$(cd "$(dirname "$0")/.." && pwd)
	B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
	if [ -d "$B" ]; then B=$(cd "$B" && pwd); fi
	NTCORE=$B/core/ntcore
	[ "$(id -u)" -eq 0 ] || fail "must run as root"
	[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (pass the build root)"
	[ -f "$B/plugins/$name/$name.so" ] || fail "no $B/plugins/$name/$name.so"
	export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks
}

nt_bench_cleanup() {
	if [ -n "$BG" ]; then
		kill -"$NT_BENCH_BG_SIG" "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
	fi
	if [ -n "$STATS_WAS" ]; then
		sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS" || true
	fi
	if declare -F bench_cleanup >/dev/null; then bench_cleanup || true; fi
	rm -rf "$T"
}

nt_bench_tmp() { # [SIGNAL]
	NT_BENCH_BG_SIG=${1:-INT}
	T=$(mktemp -d "/tmp/ntcore-bench-$NT_BENCH_NAME.XXXXXX")
	BG=
	STATS_WAS=
	COST=$T/cost
	: >"$COST"
	trap nt_bench_cleanup EXIT
}

nt_bench_stats_on() {
	local was
	was=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null) || return 1
	[ -n "$was" ] || return 1
	STATS_WAS=$was
	sysctl -qw kernel.bpf_stats_enabled=1
}

start_bg() { # LOG READY_PATTERN CMD...
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

prog_stats() { # REGEX -> "name run_cnt run_time_ns"
	bpftool -j prog show 2>/dev/null | python3 -c '
import json, re, sys
pat = re.compile(sys.argv[1])
for p in json.load(sys.stdin):
    if pat.search(p.get("name", "")):
        print(p.get("name"), p.get("run_cnt", 0), p.get("run_time_ns", 0))
' "$1"
}

record_cost() { # MODE REGEX
	prog_stats "$2" | while read -r name cnt ns; do
		echo "$1 $name $cnt $ns" >>"$COST"
	done
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
