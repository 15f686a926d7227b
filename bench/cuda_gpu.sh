#!/bin/bash
# bench/cuda_gpu.sh [--smoke] [BUILD_ROOT]
# Host-side cost of GPU-time tracing (cuda_gpu), side by side in one run, on
# the fixture runtime and the stand-in CUPTI (tests/fixtures/cuda/): a
# launch-bound "training step" (gpu_workload: 5 launches, a copy, a set, a
# graph launch per step) timed bare, with the injection library loaded but
# no daemon (it returns at once), with cuda_gpu alone (its defaults: GPU
# records, no API records), cuda_gpu with api_records (joined to threads),
# with the cuda probe alone (launch events with stacks: what the join
# needs) and with both (the full join, api_records on). Prints ns per step
# and the ratio to bare, medians of interleaved
# repetitions. The stand-in CUPTI costs far less than NVIDIA's, which does
# real work per record: the GPU machine's numbers (tests/gpu/cupti.sh) are
# the ones that count; this shows what ntcore adds around CUPTI. Root (BPF).
set -euo pipefail
SMOKE=0
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
B=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
NT=$B/core/ntcore
FX=$B/plugins/cuda
WL=$FX/cuda_gpu_workload
fail() { echo "bench/cuda_gpu: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (BPF uprobes)"
for f in "$NT" "$WL" "$FX/cuda_gpu.so" "$FX/libntcore-cupti.so.1" "$FX/libcupti.so.13"; do
	[ -e "$f" ] || fail "build first (ninja -C $B): no $f"
done
N=20000; REPS=5
[ $SMOKE = 1 ] && { N=2000; REPS=1; }
T=$(mktemp -d /tmp/nt-gpu-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks
unset LD_LIBRARY_PATH CUDA_INJECTION64_PATH NTCORE_CUPTI_SOCKET

conf() { # NAME PLUGINS
	printf 'plugins = ( %s\n  { plugin = "file"; path = "%s/%s.jsonl"; events = [ "proc.exit" ]; } );\n' \
		"$2" "$T" "$1" > "$T/$1.conf"
}
conf gpu '{ plugin = "cuda_gpu"; },'
conf gpu_api '{ plugin = "cuda_gpu"; api_records = true; },'
conf cuda '{ plugin = "cuda"; launch_events = true; stacks = true; },'
conf both '{ plugin = "cuda"; launch_events = true; stacks = true; }, { plugin = "cuda_gpu"; api_records = true; },'

ns() { sed -n 's/.*ns_per_step=\([0-9.]*\).*/\1/p'; }
run() {
	case $1 in
	bare) "$WL" "$FX/libcudart.so.13" steps $N | ns ;;
	injected) CUDA_INJECTION64_PATH=$FX/libntcore-cupti.so.1 "$WL" "$FX/libcudart.so.13" steps $N | ns ;;
	*) "$NT" -c "$T/$1.conf" -- "$WL" "$FX/libcudart.so.13" steps $N 2>/dev/null | ns ;;
	esac
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A R
modes=(bare injected gpu gpu_api cuda both)
for r in $(seq 1 $REPS); do
	for m in "${modes[@]}"; do
		v=$(run "$m")
		[ -n "$v" ] || fail "$m: no measurement"
		R[$m]+="$v "
	done
done
b=$(echo ${R[bare]} | tr ' ' '\n' | median)
printf '%-44s %12s %10s\n' "training step, fixture ($N steps, $REPS reps)" "ns/step" "vs bare"
for m in "${modes[@]}"; do
	v=$(echo ${R[$m]} | tr ' ' '\n' | median)
	case $m in
	bare) what="bare" ;;
	injected) what="injection library loaded, no daemon" ;;
	gpu) what="cuda_gpu (defaults: GPU records only)" ;;
	gpu_api) what="cuda_gpu, api_records (threads)" ;;
	cuda) what="cuda probe (launch events + stacks)" ;;
	both) what="cuda + cuda_gpu (the full join)" ;;
	esac
	printf '%-44s %12.0f %10.3f\n' "$what" "$v" "$(echo "$v $b" | awk '{ print $1 / $2 }')"
done
