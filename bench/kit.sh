#!/bin/bash
# bench/kit.sh [--smoke] [BUILD_ROOT]
#
# The plugin kit's hot-path pieces (include/ntcore/kit/), each beside what a
# plugin would use without the kit, in one run (build/bench/bench_kit,
# bench/kit/kit_bench.c):
#   hash map   nt_hmap put / get hit / get miss / delete, 8- and 16-byte
#              keys, 10 000 keys (in cache) and 1 M (memory-bound), against
#              glibc's tsearch tree
#   strings    nt_sb_u64, nt_sb_json_str and a 14-field JSON Lines record
#              (the file sink's shape) against snprintf per field and
#              byte-at-a-time escaping
# prints ns per op of each and their ratio (above 1: the kit is faster).
# Pure user space: no root, no BPF.
#
# --smoke: 10 000 keys and 20 000 appends (well under a second); CI runs
# only this.
set -euo pipefail
SMOKE=
B=
for a in "$@"; do
	case $a in
	--smoke) SMOKE=--smoke ;;
	-h | --help) sed -n '2,18p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
[ -x "$B/bench/bench_kit" ] || { echo "bench/kit: no $B/bench/bench_kit (pass the build root)" >&2; exit 1; }
exec "$B/bench/bench_kit" $SMOKE
