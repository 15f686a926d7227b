#!/bin/bash
# bench/nvlink.sh [--smoke] [BUILD_ROOT]
#
# Cost per traced NCCL call of the nvlink probe, side by side in one run
# (modes interleaved, median of the repetitions): a loop of ncclAllReduce
# calls on the stand-in libnccl (tests/fixtures/nvlink/nccl_loop.c, one
# rank, calls that do no work, so only the probe's cost is left):
#   base        the loop alone
#   metrics     ntcore with the nvlink probe, collective_events = false
#               (uprobe + uretprobe per call, counted into metrics)
#   events      ntcore with nccl.collective events on (the default) and the
#               file sink writing them
#   bpftrace    bpftrace counting entries of the same function
#               (uprobe only: a floor for one probe hit)
#   bpftrace-ret  bpftrace timing each call from entry to return
#               (uprobe + uretprobe with a per-thread map: what ntcore does,
#               without its record)
# It prints ns per call and the added ns per call, the ratios of ntcore's
# added cost to bpftrace's, and checks that ntcore counted every call.
# The machine's two CPUs are shared: ntcore's reader runs beside the loop.
# A real collective takes 10 us (small, NVLink) to milliseconds, so a
# probe cost of about a microsecond stays under 10 % of the smallest.
# The NVML poller's cost is measured on the GPU (tests/gpu/nvlink.sh cost).
#
# --smoke: one short repetition; CI runs only this.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_bench_init nvlink 27 "$@"
FX=$B/plugins/nvlink
LOOP=$FX/nccl_loop
[ -x "$LOOP" ] || fail "nccl_loop not built"
N=200000 REPS=5
[ "$SMOKE" -eq 1 ] && { N=20000; REPS=1; }
nt_bench_tmp
export NVLINK_FAKE_NCCL_GBPS=0
unset LD_LIBRARY_PATH
# a copy of its own: no probe of another run stays on its inode
cp "$FX/libnccl.so.2" "$T/libnccl.so.2"
LIB=$T/libnccl.so.2
HAVE_BPFTRACE=1
command -v bpftrace >/dev/null || HAVE_BPFTRACE=0

conf() { # NAME EVENTS
	cat > "$T/$1.conf" <<CONF
plugins = ( { plugin = "nvlink"; nvml = false; dma_fence = false; xid_tracepoint = false;
              collective_events = $2; ringbuf_kb = 32768; },
            { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; } );
CONF
}
conf metrics false
conf events true

ns() { sed -n 's/^ns_per_call=//p'; }
run_mode() {
	case $1 in
	base) "$LOOP" "$LIB" "$N" | ns ;;
	metrics | events)
		rm -f "$T/$1.jsonl"
		"$NTCORE" -c "$T/$1.conf" -- "$LOOP" "$LIB" "$N" 2>/dev/null | ns ;;
	bpftrace)
		bpftrace -q -e "uprobe:$LIB:pncclAllReduce { @n = count(); }" \
			-c "$LOOP $LIB $N" 2>/dev/null | ns ;;
	bpftrace-ret)
		bpftrace -q -e "uprobe:$LIB:pncclAllReduce { @s[tid] = nsecs; }
			uretprobe:$LIB:pncclAllReduce /@s[tid]/ { @t = hist(nsecs - @s[tid]); delete(@s[tid]); }" \
			-c "$LOOP $LIB $N" 2>/dev/null | ns ;;
	esac
}

modes=(base metrics events)
[ $HAVE_BPFTRACE = 1 ] && modes+=(bpftrace bpftrace-ret)
declare -A R
for _ in $(seq 1 $REPS); do
	for m in "${modes[@]}"; do
		v=$(run_mode "$m")
		[ -n "$v" ] || fail "$m: no measurement"
		R[$m]+="$v "
	done
done
b=$(echo ${R[base]} | tr ' ' '\n' | median)
printf '%-30s %12s %16s\n' "ncclAllReduce loop ($N calls)" "ns/call" "added ns/call"
for m in "${modes[@]}"; do
	v=$(echo ${R[$m]} | tr ' ' '\n' | median)
	printf '%-30s %12.1f %16.1f\n' "$m" "$v" "$(awk -v v="$v" -v b="$b" 'BEGIN { print v - b }')"
done
if [ $HAVE_BPFTRACE = 1 ]; then
	a=$(echo ${R[metrics]} | tr ' ' '\n' | median)
	t=$(echo ${R[bpftrace]} | tr ' ' '\n' | median)
	r=$(echo ${R[bpftrace-ret]} | tr ' ' '\n' | median)
	printf 'ratio: ntcore (metrics) adds %.2fx what bpftrace timing entry to return adds, %.2fx a bare entry count\n' \
		"$(awk -v a="$a" -v b="$b" -v t="$r" 'BEGIN { print (t > b) ? (a - b) / (t - b) : 0 }')" \
		"$(awk -v a="$a" -v b="$b" -v t="$t" 'BEGIN { print (t > b) ? (a - b) / (t - b) : 0 }')"
else
	echo "(bpftrace not installed: no comparison line)"
fi
python3 - "$T/events.jsonl" "$N" <<'PY' || fail "ntcore miscounted the calls"
import json, sys
n = int(sys.argv[2]) + 1  # + the warm-up call
ev = [json.loads(l) for l in open(sys.argv[1])]
c = [e["value"] for e in ev if e["type"] == "metric" and e["name"] == "ntcore_nvlink_nccl_calls_total"
     and e["labels"]["call"] == "ncclAllReduce"]
k = sum(1 for e in ev if e["type"] == "nccl.collective" and e["name"] == "ncclAllReduce")
if not c or c[-1] != n or k != n:
    print(f"counted {c[-1] if c else None} calls and {k} events, the loop made {n}"); sys.exit(1)
print(f"calls counted by ntcore: {n} (exact), events: {k}")
PY
