#!/bin/bash
# bench/mem.sh [--smoke] [BUILD_ROOT]
#
# Cost of the mem probe's heap tracking on an allocation-heavy workload,
# measured side by side in one run (modes interleaved, median of the
# repetitions). bench/mem/allocs frees and allocates blocks of 16..2063 bytes
# in a loop (1 free + 1 malloc/calloc a round, a realloc every 32) and times
# the loop itself once the tracer is attached:
#   base           allocs alone
#   ntcore         ntcore -c mem.conf -p PID (heap tracking with stacks,
#                  free probed past its first instruction: emulated uprobe)
#   ntcore-entry   the same with attach_skip = false: free probed on its
#                  first instruction, which the kernel single-steps
#   memleak        bcc's memleak: /usr/sbin/memleak-bpfcc -p PID
# and prints each mode's run time over base and the added time per
# allocator call, then ntcore against memleak.
#
# memleak-bpfcc compiles its BPF at start and needs kernel headers: when
# /lib/modules/$(uname -r)/build is missing, the installed
# linux-headers-*-common and linux-headers-*-<arch> trees are merged with
# symlinks under the temp dir and passed as BCC_KERNEL_SOURCE.
#
# --smoke: one short repetition (< 30 s); CI runs only this.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_bench_init mem 24 "$@"
MEMLEAK=${MEMLEAK:-/usr/sbin/memleak-bpfcc}
command -v cc >/dev/null || fail "needs a C compiler (cc)"
[ -x "$MEMLEAK" ] || fail "no $MEMLEAK (Debian package bpfcc-tools)"

if [ "$SMOKE" -eq 1 ]; then
	ITER=20000 REPS=1
else
	ITER=200000 REPS=5
fi

nt_bench_tmp TERM

cc -O2 -Wall -fno-omit-frame-pointer -o "$T/allocs" "$ROOT/bench/mem/allocs.c"

# Kernel headers for bcc.
kbuild=/lib/modules/$(uname -r)/build
if [ -z "${BCC_KERNEL_SOURCE:-}" ] && [ ! -e "$kbuild" ] && [ ! -e /sys/kernel/kheaders.tar.xz ]; then
	common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -1)
	arch=
	[ -n "$common" ] && arch=$(ls -d "${common%-common}"-* 2>/dev/null |
		grep -v -e '-common' -e '-rt' | head -1)
	[ -n "$common" ] && [ -n "$arch" ] ||
		fail "memleak-bpfcc needs kernel headers: none at $kbuild and no /usr/src/linux-headers-*-common (apt-get install linux-headers-amd64)"
	# Merge the two trees with symlinks, descending only where both have
	# the same directory (a few hundred links, not a copy).
	python3 - "$common" "$arch" "$T/kheaders" <<'EOF'
import os, sys
def merge(srcs, dst):
    os.makedirs(dst, exist_ok=True)
    names = {}
    for s in srcs:
        for n in os.listdir(s):
            names.setdefault(n, []).append(os.path.join(s, n))
    for n, paths in names.items():
        if len(paths) > 1 and all(os.path.isdir(p) for p in paths):
            merge(paths, os.path.join(dst, n))
        else:
            os.symlink(os.path.realpath(paths[-1]), os.path.join(dst, n))
merge(sys.argv[1:3], sys.argv[3])
EOF
	export BCC_KERNEL_SOURCE=$T/kheaders
fi

conf() { # NAME "mem keys"
	cat >"$T/$1.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "mem"; required = true; rss = false; faults = false; $2 },
  { plugin = "file"; path = "/dev/null"; max_size_mb = 0; }
);
EOF
}
conf ntcore ""
conf entry "attach_skip = false;"

secs() { sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' "$1" | tail -1; }
calls() { sed -n 's/.*calls=\([0-9]*\).*/\1/p' "$1" | tail -1; }

wait_for() { # FILE PATTERN PID: up to 60 s while PID lives
	for _ in $(seq 600); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

run() { # MODE REP -> $T/MODE.REP.out
	local mode=$1 out=$T/$1.$2.out gate=$T/gate.$1.$2 wl
	"$T/allocs" "$ITER" "$gate" >"$out" &
	wl=$!
	case $mode in
	base) ;;
	ntcore | entry)
		"$NTCORE" -c "$T/$mode.conf" -p "$wl" >"$T/$mode.log" 2>&1 &
		BG=$!
		wait_for "$T/$mode.log" "heap probes on" "$BG" ||
			{ cat "$T/$mode.log" >&2; kill "$wl"; fail "$mode: ntcore did not attach"; } ;;
	memleak)
		"$MEMLEAK" -p "$wl" >"$T/$mode.log" 2>&1 &
		BG=$!
		wait_for "$T/$mode.log" "Attaching to pid" "$BG" ||
			{ cat "$T/$mode.log" >&2; kill "$wl"; fail "memleak-bpfcc did not attach"; }
		sleep 0.2 ;;
	esac
	touch "$gate"
	wait "$wl" || fail "$mode: the workload failed"
	if [ -n "$BG" ]; then
		# SIGINT is ignored by background jobs of a script (python keeps
		# it so): memleak gets SIGTERM, ntcore its usual SIGINT.
		kill "-$([ "$mode" = memleak ] && echo TERM || echo INT)" "$BG" 2>/dev/null || true
		wait "$BG" 2>/dev/null || true
		BG=
	fi
	[ -n "$(secs "$out")" ] || fail "$mode: no timing from the workload"
}

MODES="base ntcore entry memleak"
for rep in $(seq "$REPS"); do
	for m in $MODES; do run "$m" "$rep"; done
done

mode_median() { # MODE
	for rep in $(seq "$REPS"); do secs "$T/$1.$rep.out"; done | median
}
CALLS=$(calls "$T/base.1.out")
BASE=$(mode_median base)
echo "bench/mem: allocs, $ITER rounds ($CALLS allocator calls), median of $REPS"
printf "  %-14s %10s %9s %14s\n" mode seconds "x base" "us/call added"
for m in $MODES; do
	s=$(mode_median "$m")
	awk -v m="$m" -v s="$s" -v b="$BASE" -v c="$CALLS" 'BEGIN {
		printf "  %-14s %10.4f %8.1fx %14.3f\n", m, s, s / b, (s - b) * 1e6 / c }'
done
N=$(mode_median ntcore)
E=$(mode_median entry)
M=$(mode_median memleak)
awk -v n="$N" -v e="$E" -v m="$M" -v b="$BASE" 'BEGIN {
	printf "  ntcore / memleak run time: %.2f (memleak is %.1fx slower)\n", n / m, (m - b) / (n - b)
	printf "  free past its first instruction vs on it: %.2fx the run time\n", n / e }'
