#!/bin/bash
# Late loading: like PyTorch loading the libcudart.so.13 that a Python
# virtual environment ships (site-packages/nvidia/cu13/lib/), a running
# target dlopen()s a CUDA runtime from a path nobody knew at start-up and
# calls it at once. The probe must see every call, the first included
# (stop_on_load holds the target while the probes attach). Root (BPF).
# Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
[ -x "$FX/cuda_late_load" ] || fail "cuda_late_load not built (build plugins/cuda first)"
nt_test_tmp nt-cuda-late
unset LD_LIBRARY_PATH

# A fresh copy in a venv-like tree: new inodes no probe is attached to yet.
V=$T/venv/lib/python3.12/site-packages/nvidia/cu13/lib
mkdir -p "$V"
cp "$FX/libcudart.so.13" "$FX/libcuda.so.1" "$V/"

for delay in ${DELAYS:-300 0}; do
	cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_layer = "runtime"; },
  { plugin = "file"; path = "$T/out-$delay.jsonl"; metrics = true; }
);
CONF
	timeout 60 "$NT" -c "$T/c.conf" -- "$FX/cuda_late_load" "$V/libcudart.so.13" "$delay" \
		> "$T/out" 2> "$T/err" || { cat "$T/err" >&2; fail "ntcore failed"; }
	grep -q "late_load done" "$T/out" || { cat "$T/out" "$T/err" >&2; fail "workload failed"; }
	python3 - "$T/out-$delay.jsonl" "$V/libcudart.so.13" <<'PY' || { cat "$T/err" >&2; fail "late-loaded runtime (delay $delay ms): calls missed"; }
import json, sys
path, lib = sys.argv[1], sys.argv[2]
ev = [json.loads(l) for l in open(path)]
errs = []
libs = [e["path"] for e in ev if e["type"] == "cuda.library"]
if not any(p.endswith(lib) for p in libs):
    errs.append(f"{lib} not probed: {libs}")
allocs = sorted(e["size"] for e in ev if e["type"] == "cuda.alloc" and e["ret"] == 0)
if allocs != [1000, 2000, 3000]:
    errs.append(f"allocations {allocs}, want [1000, 2000, 3000]")
frees = sorted(e["size"] for e in ev if e["type"] == "cuda.free" and e["ret"] == 0)
if frees != [1000, 2000, 3000]:
    errs.append(f"frees {frees}")
cp = [(e["direction"], e["bytes"]) for e in ev if e["type"] == "cuda.memcpy"]
if cp != [(1, 4096)]:
    errs.append(f"copies {cp}")
lk = [e["value"] for e in ev if e["type"] == "metric" and e["name"] == "ntcore_cuda_launches_total"
      and e["labels"]["kernel"] == "late_kernel"]
if not lk or lk[-1] != 10:
    errs.append(f"late_kernel launches {lk}")
if errs:
    print("\n".join(errs)); sys.exit(1)
print("ok:", libs)
PY
	echo "ok - runtime dlopen()ed after ${delay} ms: every call seen"
done
echo "PASS"
