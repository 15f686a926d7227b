#!/bin/bash
# Issue 19, attach-time kernel names, on the fixtures: ntcore attaches with
# -p to a job whose kernel handles were all made before the attach
# (tests/fixtures/cuda/attach_names.c: 4 runtime kernels x 50 launches, 6
# driver kernels x 40, optionally 3 driver kernels got after the attach x
# 20), and every launch in the window must carry its kernel name, each
# counted under the method that named it (ntcore_cuda_launches_named_total):
#   default layer (driver), 3 loads after the attach: load 60, memory 440
#     (the offset learned from the 3 loads names the runtime's CUkernels and
#     the 6 old driver handles from the stand-in driver's structs, offset 40)
#   launch_layer = "both", no load: symbol 200 (host stubs), join 200 (the
#     runtime's driver launches), memory 240 (offset learned from the joins)
#   default layer, no load: no known name: the offset is guessed from the
#     10 unknown handles (the one slot naming each with a different
#     plausible name; the decoy module name at 8 is shared): memory 440
# Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
[ -x "$FX/cuda_attach_names" ] || fail "cuda_attach_names not built"
nt_test_tmp nt-cuda-attach-names
unset LD_LIBRARY_PATH

# run NAME LAYER LOAD: the job, the attach, the window; leaves $T/NAME.jsonl
run() {
	local name=$1 layer=$2 load=$3 d=$T/$1 wl nt
	mkdir -p "$d"
	cat > "$d/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_layer = "$layer"; interval_ms = 200; },
  { plugin = "file"; path = "$T/$name.jsonl"; metrics = true; interval_ms = 200; }
);
CONF
	"$FX/cuda_attach_names" "$d" "$load" > "$d/wl.out" 2>&1 &
	wl=$!
	for _ in $(seq 1 100); do grep -q "warm done" "$d/wl.out" && break; sleep 0.1; done
	grep -q "warm done" "$d/wl.out" || { kill $wl; fail "$name: the job did not warm up"; }
	"$NT" -c "$d/c.conf" -p "$wl" > "$d/nt.out" 2> "$d/nt.err" &
	nt=$!
	for _ in $(seq 1 200); do grep -q "launches probed" "$d/nt.err" && break; sleep 0.1; done
	grep -q "launches probed" "$d/nt.err" || { kill $nt $wl; cat "$d/nt.err" >&2; fail "$name: ntcore did not attach"; }
	touch "$d/go"
	for _ in $(seq 1 200); do [ -f "$d/done" ] && break; sleep 0.1; done
	[ -f "$d/done" ] || { kill $nt $wl; fail "$name: the job did not finish"; }
	sleep 1
	kill -INT $nt; wait $nt || { cat "$d/nt.err" >&2; fail "$name: ntcore failed"; }
	touch "$d/stop"; wait $wl || fail "$name: the job failed"
	grep "attach-time names" "$d/nt.err" | sed "s/^/$name: /" || true
}

check() {
	python3 - "$T/$1.jsonl" "$1" "$2" <<'PY' || { cat "$T/$1/nt.err" >&2; fail "$1: attach-time names"; }
import json, sys
path, name, want = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ev = [json.loads(l) for l in open(path) if l.strip()]
last, meth = {}, {}
for e in ev:
    if e["type"] != "metric":
        continue
    if e["name"] == "ntcore_cuda_launches_total":
        last[e["labels"]["kernel"]] = e["value"]
    elif e["name"] == "ntcore_cuda_launches_named_total":
        meth[e["labels"]["method"]] = e["value"]
total = sum(last.values())
unnamed = {k: v for k, v in last.items() if k.startswith("0x")}
named = total - sum(unnamed.values())
print(f"{name}: {int(named)} of {int(total)} launches named; by method {meth}")
errs = []
if meth != want:
    errs.append(f"methods {meth}, want {want}")
if want.get("none", 0) == 0 and unnamed:
    errs.append(f"unnamed {unnamed}")
for k in ("rt_gemm(float*, float*, int)", "drv_scale(float*, float)",
          "triton_per_fused_softmax_2"):
    if want.get("none", 0) == 0 and k not in last:
        errs.append(f"no kernel {k!r} in {sorted(last)}")
if errs:
    print("\n".join(errs)); sys.exit(1)
PY
}

run load auto load
check load '{"load": 60, "memory": 440}'
run both both noload
check both '{"symbol": 200, "join": 200, "memory": 240}'
run none auto noload
check none '{"memory": 440}'
echo "ok - attach-time names: driver structs at a learned offset, host stubs, runtime->driver join"
echo "PASS"
