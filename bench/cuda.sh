#!/bin/bash
# bench/cuda.sh [--smoke] [BUILD_ROOT]
# Cost per traced kernel launch of the cuda probe, side by side in one run:
# a launch-heavy loop (tests/fixtures/cuda/launch_loop.c: cudaLaunchKernel of
# the fixture runtime, which calls cuLaunchKernel of the fixture driver, as
# the real runtime does) timed bare, with ntcore attached at each launch
# layer, and with bpftrace attached to the same symbol doing a bare count.
# Prints ns per launch and the added ns per traced call. Root (BPF).
set -euo pipefail
SMOKE=0
if [ "${1:-}" = --smoke ]; then SMOKE=1; shift; fi
B=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
NT=$B/core/ntcore
FX=$B/plugins/cuda
LOOP=$FX/cuda_launch_loop
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (BPF uprobes)"
[ -x "$NT" ] && [ -x "$LOOP" ] && [ -f "$FX/cuda.so" ] || fail "build first (ninja -C $B)"
BT=$(command -v bpftrace || true)
N=2000000; REPS=3
[ $SMOKE = 1 ] && { N=300000; REPS=1; }
T=$(mktemp -d /tmp/nt-cuda-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks
unset LD_LIBRARY_PATH

conf() { cat > "$T/$1.conf" <<CONF
plugins = ( { plugin = "cuda"; launch_layer = "$1"; },
            { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; } );
CONF
}
for l in auto runtime driver both; do conf $l; done
cp "$T/auto.conf" "$T/stats.conf"

ns() { sed -n 's/^ns_per_launch=//p'; }
base()    { "$LOOP" "$N" | ns; }
ntcore()  { rm -f "$T/$1.jsonl"; "$NT" -c "$T/$1.conf" -- "$LOOP" "$N" 2>/dev/null | ns; }
bpft()    { "$BT" -q -e "uprobe:$1:$2 { @n = count(); }" -c "$LOOP $N" 2>/dev/null | ns; }

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A R
modes=(base auto runtime)
[ $SMOKE = 0 ] && modes+=(driver both)
[ -n "$BT" ] && modes+=(bpftrace-cuLaunchKernel)
[ -n "$BT" ] && [ $SMOKE = 0 ] && modes+=(bpftrace-cudaLaunchKernel)
for r in $(seq 1 $REPS); do
	for m in "${modes[@]}"; do
		case $m in
		base) v=$(base) ;;
		bpftrace-cuLaunchKernel) v=$(bpft "$FX/libcuda.so.1" cuLaunchKernel) ;;
		bpftrace-cudaLaunchKernel) v=$(bpft "$FX/libcudart.so.13" cudaLaunchKernel) ;;
		*) v=$(ntcore "$m") ;;
		esac
		[ -n "$v" ] || fail "$m: no measurement"
		R[$m]+="$v "
	done
done
b=$(echo ${R[base]} | tr ' ' '\n' | median)
printf '%-28s %12s %16s\n' "launch loop ($N launches)" "ns/launch" "added ns/launch"
for m in "${modes[@]}"; do
	v=$(echo ${R[$m]} | tr ' ' '\n' | median)
	printf '%-28s %12.1f %16.1f\n' "$m" "$v" "$(awk -v v="$v" -v b="$b" 'BEGIN { print v - b }')"
done
if [ -n "$BT" ]; then
	a=$(echo ${R[auto]} | tr ' ' '\n' | median)
	t=$(echo ${R[bpftrace-cuLaunchKernel]} | tr ' ' '\n' | median)
	printf 'ratio: ntcore (auto) adds %.2fx what a bare bpftrace count on the same symbol adds\n' \
		"$(awk -v a="$a" -v b="$b" -v t="$t" 'BEGIN { print (a - b) / (t - b) }')"
fi
# the counts must be exact too (the last auto run)
python3 - "$T/auto.jsonl" "$N" <<'PY' || fail "ntcore miscounted the launches"
import json, sys
n = int(sys.argv[2])
v = [json.loads(l) for l in open(sys.argv[1])]
c = sum(e["value"] for e in v if e["type"] == "metric" and e["name"] == "ntcore_cuda_launches_total")
if c != n + 1:  # + the warm-up launch
    print(f"counted {c} launches, the loop made {n + 1}"); sys.exit(1)
print(f"launches counted by ntcore: {c} (exact)")
PY
# Time inside the BPF program per launch (kernel.bpf_stats_enabled): the
# part of the cost each tool controls, steadier than wall time on a busy
# machine; the rest is the uprobe trap, the same for both.
progtime() { # progtime NAME CMD... : avg ns per run of the program called NAME*
	local was pid name=$1
	shift
	was=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -qw kernel.bpf_stats_enabled=1
	"$@" > /dev/null 2>&1 &
	pid=$!
	sleep 3
	bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
best = None
for p in json.load(sys.stdin):
    if p.get("type") != "kprobe" or not p.get("run_cnt") or not p.get("name", "").startswith(sys.argv[1]):
        continue
    if best is None or p["run_cnt"] > best["run_cnt"]:
        best = p
print("%.1f" % (best["run_time_ns"] / best["run_cnt"]) if best else "n/a")' "$name"
	kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null
	sysctl -qw kernel.bpf_stats_enabled="$was"
}
if command -v bpftool >/dev/null && [ $SMOKE = 0 ]; then
	BIG=$((N * 20))
	echo "time inside the BPF program per launch (bpf_stats):"
	echo "  ntcore (auto):        $(progtime launch_drv "$NT" -c "$T/stats.conf" -- "$LOOP" "$BIG") ns"
	[ -n "$BT" ] && echo "  bpftrace bare count:  $(progtime cuLaunchKernel "$BT" -q -e "uprobe:$FX/libcuda.so.1:cuLaunchKernel { @n = count(); }" -c "$LOOP $BIG") ns"
fi
