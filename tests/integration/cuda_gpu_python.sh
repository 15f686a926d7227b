#!/bin/bash
# Integration test of cuda_gpu with the python probe (root, real BPF, the
# fixture runtime and the stand-in CUPTI, Debian's python3.11): GPU time is
# put under the Python stack of each launch, which the python probe lends
# (python.launch_stack), including the launches of a C++ engine thread
# ("pt_autograd_0", holding a Python thread state that never runs a frame,
# like PyTorch's) while the Python thread waits in backward(). The workload
# is tests/integration/python/join_helper.c's: forward() -> 20 launches of
# join_fwd_kernel from the Python thread, backward() -> 20 launches of
# join_bwd_kernel from the engine thread; each kernel runs 1 us on the
# stand-in's GPU (grid 1). Checks, in the GPU-weighted folded stacks
# (cuda.gpu_stack) and the kernel events:
#   - >= 90 % of join_fwd_kernel's GPU us under forward() (own stack);
#   - >= 90 % of join_bwd_kernel's GPU us under backward() with the marker
#     "[launched by thread TID pt_autograd_0]";
#   - none under the wrong function; every kernel event's py_stack is the
#     stack its folded line shows.
# Run twice: as is, and with the daemon stopped for 0.6 s in the middle
# (SIGSTOP), so that the launches of that time are joined late, after
# their threads went on sampling (the python probe's history must reach
# back to them; with 32 points it did not).
# Usage: cuda_gpu_python.sh BUILD_ROOT
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
PY=/usr/bin/python3.11
FX=$B/plugins/cuda
[ -x "$PY" ] || fail "Debian's $PY is needed (apt-get install python3.11)"
for f in cuda.so cuda_gpu.so libntcore-cupti.so.1 libcupti.so.13 libcudart.so.13; do
	[ -e "$FX/$f" ] || fail "$FX/$f is not built"
done
[ -f "$B/plugins/python/python.so" ] || fail "python.so is not built"
nt_test_tmp nt-cuda-gpu-py
unset LD_LIBRARY_PATH CUDA_INJECTION64_PATH
cc -O1 -fno-omit-frame-pointer -shared -fPIC -o "$T/libjoin.so" \
	"$HERE/python/join_helper.c" -ldl -lpthread || fail "cannot build the helper"
cat > "$T/train.py" <<'PYEOF'
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
if lib.join_init(sys.argv[2].encode(), 1):
    sys.exit("cannot load " + sys.argv[2] + " or start the engine thread")
def forward():
    # longer than a sample period: the own-stack join takes the newest
    # sample at or before a launch (docs/python.md)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.015:
        pass
    lib.join_forward(20)
def backward():
    lib.join_backward(20)
def train_step():
    forward()
    backward()
t = time.time()
while time.time() - t < 4:
    train_step()
PYEOF
cat > "$T/gpu.conf" <<CONF
plugins = (
  # driver layer: every GPU record joins a driver-layer launch event (with
  # "auto", the fixture runtime's first launch, which loads the driver,
  # is counted at the runtime layer during the hand-over: docs/cuda.md)
  { plugin = "cuda"; launch_layer = "driver"; launch_events = true; stacks = true; },
  { plugin = "python"; frequency = 99; },
  { plugin = "cuda_gpu"; api_records = true; },
  { plugin = "file"; path = "$T/gpu.jsonl"; events = [ "cuda.kernel_exec" ]; },
  { plugin = "file"; name = "folded"; path = "$T/gpu.folded"; format = "folded";
    events = [ "cuda.gpu_stack" ]; }
);
CONF
run() { # STALL(0|1)
	rm -f "$T/gpu.folded" "$T/gpu.jsonl"
	# no `timeout` around it: SIGSTOP must reach the daemon (the job runs 4 s)
	"$NTCORE" -c "$T/gpu.conf" -- "$PY" "$T/train.py" "$T/libjoin.so" "$FX/libcudart.so.13" \
		> "$T/log" 2>&1 &
	local nt=$!
	if [ "$1" = 1 ]; then
		for _ in $(seq 100); do grep -q "GPU activity from" "$T/log" && break; sleep 0.1; done
		sleep 0.5
		kill -STOP $nt
		sleep "${STALL_S:-0.6}"
		kill -CONT $nt
	fi
	wait $nt || { cat "$T/log" >&2; fail "ntcore failed (stall $1)"; }
	grep "CUDA launches joined" "$T/log" || true
	check "$1" || { grep -v "probes attached" "$T/log" | tail -20 >&2; fail "see above (stall $1)"; }
}

check() { # STALL
python3 - "$T/gpu.folded" "$T/gpu.jsonl" "$1" <<'PYEOF'
import collections, json, sys
stall = sys.argv[3] == "1"
lines = collections.Counter()
for l in open(sys.argv[1]):
    s, n = l.rstrip("\n").rsplit(" ", 1)
    lines[s] += int(n)
MARK = ";[launched by thread "
def us(kernel, pred=lambda s: True):
    return sum(n for s, n in lines.items() if s.endswith("[gpu] " + kernel) and pred(s))
fwd, bwd = us("join_fwd_kernel"), us("join_bwd_kernel")
fwd_ok = us("join_fwd_kernel", lambda s: "forward (" in s and MARK not in s)
bwd_ok = us("join_bwd_kernel", lambda s: "backward (" in s.split(MARK)[0] and
            MARK in s and " pt_autograd_0];" in s)
fwd_bad = us("join_fwd_kernel", lambda s: "backward (" in s or MARK in s)
bwd_bad = us("join_bwd_kernel", lambda s: "forward (" in s)
kev = [json.loads(l) for l in open(sys.argv[2])]
with_py = sum(1 for e in kev if e["py_stack"])
# a kernel's folded line is its py_stack (or, without one, its CPU stack;
# without either, "[THREAD];API": a launch whose host call never came)
bases = {e["py_stack"] or e["stack"] for e in kev}
bare = {e["name"] for e in kev if not e["py_stack"] and not e["stack"]}
agree = all(s.rsplit(";[gpu] ", 1)[0] in bases or
            (s.startswith("[") and s.rsplit(";[gpu] ", 1)[1] in bare) for s in lines)
print(f"GPU us: fwd {fwd} ({fwd_ok} under forward()), bwd {bwd} ({bwd_ok} under backward() "
      f"lent by pt_autograd_0); wrong: fwd {fwd_bad}, bwd {bwd_bad}; kernels {len(kev)}, "
      f"with a Python stack {with_py}; folded lines match the events: {agree}")
for s, n in lines.most_common(3):
    print(f"  {n:6d} {s[-200:]}")
# stalled: the lent stacks also need the blocked thread's off-CPU periods
# of that time in BPF (its last 256), which a loaded machine's preemptions
# can outrun in 0.6 s: the own stacks are the point there
ok = (fwd >= 1000 and bwd >= 1000 and fwd + bwd == len(kev) and fwd_ok >= 0.9 * fwd
      and (stall or bwd_ok >= 0.9 * bwd) and fwd_bad == 0 and bwd_bad == 0 and agree)
sys.exit(0 if ok else 1)
PYEOF
}

run 0
run 1
echo "PASS cuda_gpu_python"
