#!/bin/bash
# Issue 19: Python frames in the CUDA detectors' alerts. Debian's
# python3.11 drives the fixture runtime through ctypes with one planted
# case per function: leaky_step() keeps every 8 MiB allocation in a list
# (cuda_memleak), ask_too_much() asks for 1 TiB (cuda_oom), bad_device()
# calls cudaSetDevice(99) (cuda_errors), wait_gpu() blocks 3 s in
# cudaDeviceSynchronize (cuda_hang). The python probe lends each call's
# Python stack (python.call_stack); each alert must name its function and
# line in this script. The python probe comes before the detectors in the
# config (bus order: docs/cuda-detectors.md). Root (BPF).
# Usage: cuda_python_alerts.sh BUILD_ROOT
set -euo pipefail
B=${1:?usage: cuda_python_alerts.sh BUILD_ROOT}
NTCORE=$B/core/ntcore
PY=/usr/bin/python3.11
CUDART=$B/plugins/cuda/libcudart.so.13
fail() { echo "FAIL cuda_python_alerts: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (loads BPF)"
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (build first)"
for so in plugins/python/python.so plugins/cuda/cuda.so plugins/cuda/detectors/cuda_oom.so; do
	[ -f "$B/$so" ] || fail "no $B/$so"
done
[ -f "$CUDART" ] || fail "no fixture runtime $CUDART"
[ -x "$PY" ] || fail "Debian's $PY is needed (apt-get install python3.11)"
export NTCORE_PLUGIN_PATH=$B/plugins:$B/plugins/cuda/detectors:$B/sinks
T=$(mktemp -d /tmp/ntcore-pyalerts.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT

cat > "$T/train.py" <<'PYEOF'
import ctypes, sys, time
rt = ctypes.CDLL(sys.argv[1])
kept = []
# Each function stays on the CPU ~30 ms before its CUDA call (a sampled
# function: the join names a call by the thread's newest sample, 99 Hz).

def leaky_step():  # LEAK_BEGIN
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.03:
        pass
    p = ctypes.c_void_p()
    rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(8 << 20))
    kept.append(p)  # LEAK_END

def ask_too_much():  # OOM_BEGIN
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.03:
        pass
    p = ctypes.c_void_p()
    return rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 40))  # OOM_END

def bad_device():  # ERROR_BEGIN
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.03:
        pass
    return rt.cudaSetDevice(99)  # ERROR_END

def wait_gpu():  # HANG_BEGIN
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.03:
        pass
    rt.ntfx_block_next_sync(3000)
    rt.cudaDeviceSynchronize()  # HANG_END

time.sleep(0.5)  # the probes attach to this process
t = time.time()
while time.time() - t < 2.5:
    leaky_step()
ask_too_much()
bad_device()
wait_gpu()
print("train done", flush=True)
PYEOF
cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; stacks = true; enter_events = true; },
  { plugin = "python"; frequency = 99; },
  { plugin = "cuda_memleak"; window_ms = 100; windows = 8; threshold = 0.8;
    min_growth_bytes = 4194304; },
  { plugin = "cuda_oom"; },
  { plugin = "cuda_errors"; },
  { plugin = "cuda_hang"; timeout_ms = 1500; interval_ms = 250; },
  { plugin = "file"; path = "$T/out.jsonl";
    events = [ "alert.*", "python.call_stack", "cuda.alloc", "cuda.error" ]; }
);
CONF
LD_LIBRARY_PATH=$B/plugins/cuda timeout 60 "$NTCORE" -c "$T/c.conf" -- \
	"$PY" "$T/train.py" "$CUDART" > "$T/log" 2>&1 ||
	{ cat "$T/log" >&2; fail "ntcore exited $?"; }
grep -q "train done" "$T/log" || { cat "$T/log" >&2; fail "workload failed"; }
"$PY" - "$T/out.jsonl" "$T/train.py" <<'PYEOF' || { tail -30 "$T/log" >&2; fail "see above"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
src = open(sys.argv[2]).read().splitlines()
rng = {}
for i, l in enumerate(src):
    for tag in ("LEAK", "OOM", "ERROR", "HANG"):
        if f"# {tag}_BEGIN" in l: rng.setdefault(tag, [0, 0])[0] = i + 1
        if f"# {tag}_END" in l: rng.setdefault(tag, [0, 0])[1] = i + 1
fn = {"LEAK": "leaky_step", "OOM": "ask_too_much", "ERROR": "bad_device", "HANG": "wait_gpu"}
want = {"alert.cuda_memleak": "LEAK", "alert.cuda_oom": "OOM",
        "alert.cuda_errors": "ERROR", "alert.cuda_hang": "HANG"}
def names(msg, tag):
    # "function (file:line)" with the line inside the function
    lo, hi = rng[tag]
    return any(f"{fn[tag]} ({sys.argv[2]}:{n})" in msg for n in range(lo, hi + 1))
lends = sum(1 for e in ev if e["type"] == "python.call_stack")
print(f"python.call_stack events: {lends}")
errs = []
for typ, tag in want.items():
    al = [e for e in ev if e["type"] == typ]
    hit = [e for e in al if names(e.get("message", ""), tag)]
    print(f"{typ}: {len(al)} alerts, {len(hit)} naming {fn[tag]} (lines {rng[tag]})")
    for e in al[:2]:
        print("   ", e.get("message", "")[:400])
    if not hit:
        errs.append(f"{typ}: no alert names {fn[tag]}")
if errs:
    print("\n".join(errs)); sys.exit(1)
PYEOF
echo "PASS cuda_python_alerts"
