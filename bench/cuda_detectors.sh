#!/bin/bash
# bench/cuda_detectors.sh [--smoke] [BUILD_ROOT]
#
# consume() cost per event of the allocation-tracking CUDA detectors
# (cuda_memleak, cuda_oom, cuda_frag), side by side in one run: N
# cudaMalloc/cudaFree pairs with stacks fed to each detector .so through the
# unit tests' stand-in host (build/bench/bench_cudadet_consume,
# bench/cuda_detectors/consume_cost.c), the detectors interleaved over 5
# rounds; prints each one's median ns per event and its ratio to the
# cheapest. Pure user space: no root, no GPU.
#
# --smoke: 2 000 pairs, one round; CI runs only this.
set -euo pipefail
N=20000 REPS=5
B=
for a in "$@"; do
	case $a in
	--smoke) N=2000 REPS=1 ;;
	-h | --help) sed -n '2,12p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
exe=$B/bench/bench_cudadet_consume
[ -x "$exe" ] || { echo "bench/cuda_detectors: no $exe (the cuda plugin not built?)" >&2; exit 1; }
CUDADET_BENCH_N=$N CUDADET_BENCH_REPS=$REPS exec "$exe"
