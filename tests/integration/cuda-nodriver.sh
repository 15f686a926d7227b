#!/bin/bash
# launch_layer = "auto" probes launches at the driver layer; a process whose
# runtime has no driver library must not go unseen (it counted 0 of
# 1,000,001 launches while the log said "driver layer"). Root (BPF).
#  1. a runtime-only process (the fixture runtime linked into the program,
#     no driver ever loaded): the probe says it found no driver library,
#     falls back to the runtime layer and counts every launch;
#  2. the runtime loads its driver inside its very first launch (the
#     fixture launch loop): the probe moves to the driver layer and counts
#     that launch once, every launch exactly once.
# Where a CUDA driver is installed at a usual path, (1) checks instead that
# the driver layer is chosen at once. Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
for x in cuda_launch_nodrv cuda_launch_loop; do
	[ -x "$FX/$x" ] || fail "$x not built (build plugins/cuda first)"
done
nt_test_tmp nt-cuda-nodrv
unset LD_LIBRARY_PATH
N=1000

cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_layer = "auto"; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; }
);
CONF

# launches COUNT_FILE: the launches counted, by kernel, from the metrics
launches() {
	python3 - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for e in ev:
    if e["type"] == "metric" and e["name"] == "ntcore_cuda_launches_total":
        by[e["labels"]["kernel"]] = by.get(e["labels"]["kernel"], 0) + e["value"]
print(" ".join(f"{k}={int(v)}" for k, v in sorted(by.items())) or "none")
PY
}

run() { # NAME PROGRAM
	rm -f "$T/out.jsonl"
	timeout 60 "$NT" -c "$T/c.conf" -- "$FX/$2" "$N" > "$T/$1.out" 2> "$T/$1.err" ||
		{ cat "$T/$1.err" >&2; fail "$1: ntcore failed"; }
	grep -q "ns_per_launch=" "$T/$1.out" || { cat "$T/$1.out" "$T/$1.err" >&2; fail "$1: workload failed"; }
}

system_driver=
for d in /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 \
	 /usr/lib/aarch64-linux-gnu/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 \
	 /usr/lib/wsl/lib/libcuda.so.1; do
	[ -e "$d" ] && system_driver=$d
done

run nodrv cuda_launch_nodrv
got=$(launches "$T/out.jsonl")
if [ -z "$system_driver" ]; then
	grep -q "no CUDA driver library (libcuda.so.1) found: launches are probed at the runtime layer" "$T/nodrv.err" ||
		{ cat "$T/nodrv.err" >&2; fail "runtime-only: no word of the missing driver"; }
	grep -q "launches probed at the driver layer" "$T/nodrv.err" &&
		{ cat "$T/nodrv.err" >&2; fail "runtime-only: the log says 'driver layer'"; }
	[ "$got" = "tiny_kernel=$((N + 1))" ] ||
		{ cat "$T/nodrv.err" >&2; fail "runtime-only: counted '$got', the loop made tiny_kernel=$((N + 1))"; }
	echo "runtime-only process: $got launches at the runtime layer, and said why"
else
	grep -q "launches probed at the driver layer" "$T/nodrv.err" ||
		{ cat "$T/nodrv.err" >&2; fail "a driver is installed ($system_driver): the driver layer was not chosen"; }
	echo "runtime-only process: a driver is installed ($system_driver): the driver layer at once"
fi

run handover cuda_launch_loop
got=$(launches "$T/out.jsonl")
grep -q "a CUDA driver library: launches are now probed at the driver layer" "$T/handover.err" ||
	[ -n "$system_driver" ] || { cat "$T/handover.err" >&2; fail "hand-over: not logged"; }
case $got in
"tiny_kernel=$((N + 1))" | "triton_tiny=0 tiny_kernel=$((N + 1))") ;;
*) cat "$T/handover.err" >&2; fail "hand-over: counted '$got', the loop made tiny_kernel=$((N + 1))" ;;
esac
echo "driver loaded by the first launch: $got, each launch once"
echo "PASS cuda-nodriver"
