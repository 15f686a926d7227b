#!/bin/bash
# bench/identity.sh [--smoke] [BUILD_ROOT]
#
# What a process's identity costs (issue 21; bench/identity/ident_bench.c):
# the first lookup of a live process (/proc/PID/cgroup and /proc/PID/stat
# read, parsed, cached), a cache hit, the path parser alone, and
# nt_metric_add on a family with a pid label as declared beside the same
# under the host-wide identity labels, in one run. Pure user space: no
# root, no BPF. --smoke: 50 processes, 20 rounds (well under a second).
set -euo pipefail
SMOKE=
B=
for a in "$@"; do
	case $a in
	--smoke) SMOKE=--smoke ;;
	-h | --help) sed -n '2,10p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
[ -x "$B/bench/bench_identity" ] || { echo "bench/identity: no $B/bench/bench_identity (pass the build root)" >&2; exit 1; }
exec "$B/bench/bench_identity" $SMOKE
