#!/bin/bash
# GPU check of the python probe's CUDA join: with the cuda probe (launch
# events) and the python probe both loaded, kernel launches are attributed to
# the Python frames that issued them (python.stack, state "cuda"), so the
# flame graph shows the model's forward and backward above the kernels:
# backward kernels, launched by autograd's C++ threads, under the frames of
# the Python thread blocked in loss.backward() ([launched by thread ...]).
#   tests/gpu/python_cuda_join.sh [BUNDLE] [OUTDIR]
set -uo pipefail
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/python-cuda-join}}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
mkdir -p "$O"
W=$(mktemp -d /tmp/pyjoin.XXXXXX)
[ -f "$D/env.sh" ] && . "$D/env.sh"
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks PYTHONUNBUFFERED=1
cat > "$W/train.py" <<'PYEOF'
import time, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(512, 512)
        self.b = torch.nn.Linear(512, 10)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
def train_step(net, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
net = Net().cuda(); opt = torch.optim.SGD(net.parameters(), lr=0.01)
x = torch.randn(256, 512, device="cuda"); y = torch.randint(0, 10, (256,), device="cuda")
def switches():
    # the main thread's context switches (blocks: voluntary)
    d = dict(l.split(":", 1) for l in open("/proc/self/status"))
    return int(d["voluntary_ctxt_switches"]), int(d["nonvoluntary_ctxt_switches"])
t = time.time(); steps = 0; v0, n0 = switches()
while time.time() - t < 4:
    train_step(net, opt, x, y)
    steps += 1
torch.cuda.synchronize()
v1, n1 = switches()
print(f"train: {steps} steps in 4 s; main thread blocked {v1 - v0} times "
      f"({(v1 - v0) / max(steps, 1):.2f} per step), preempted {n1 - n0} times")
PYEOF
cat > "$W/join.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_events = true; },
  { plugin = "python"; frequency = 99; },
  { plugin = "file"; path = "$W/join.jsonl"; events = [ "python.stack", "cuda.launch" ]; },
  { plugin = "file"; name = "folded"; path = "$O/join.folded"; format = "folded"; events = [ "python.stack" ]; }
);
CONF
"$D/core/ntcore" -c "$W/join.conf" -- "$PY" "$W/train.py" > "$O/join.log" 2>&1
echo "ntcore exit $?"
grep -E "^train:|CUDA launches joined" "$O/join.log"
"$PY" - "$W/join.jsonl" <<'PYEOF' | tee -a "$O/join.log"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
launches = sum(1 for e in ev if e["type"] == "cuda.launch")
cuda = [e for e in ev if e["type"] == "python.stack" and e.get("state") == "cuda"]
def python_part(e):
    return e["stack"].split(";[kernel]")[0]
joined = [e for e in cuda if not python_part(e).startswith("[no recent Python sample]")]
n_joined = sum(e["count"] for e in joined)
fwd = sum(e["count"] for e in joined if "Net.forward" in python_part(e))
bwd = sum(e["count"] for e in joined if "backward" in python_part(e))
# launches of threads without Python frames (autograd's pt_autograd_N) lent
# the stack of the Python thread blocked in loss.backward()
cross = [e for e in joined if "[launched by thread " in python_part(e)]
n_cross = sum(e["count"] for e in cross)
cross_bwd = sum(e["count"] for e in cross
                if "backward" in python_part(e).split(";[launched by thread ")[0])
def kernel(e):
    return e["stack"].split(";[kernel] ", 1)[-1]
# kernels only the backward pass launches (softmax/nll_loss backward)
bk = [e for e in cuda if "backward" in kernel(e)]
n_bk = sum(e["count"] for e in bk)
bk_ok = sum(e["count"] for e in bk if "[launched by thread " in python_part(e)
            and "backward" in python_part(e).split(";[launched by thread ")[0])
print(f"cuda.launch events {launches}; joined with Python frames {n_joined} "
      f"({100.0 * n_joined / max(launches, 1):.1f}%); under Net.forward {fwd}; "
      f"under a Python backward() call {bwd}")
print(f"crossed threads {n_cross}, of which under backward() {cross_bwd}; "
      f"backward kernels {n_bk}, joined under backward() across threads {bk_ok} "
      f"({100.0 * bk_ok / max(n_bk, 1):.1f}%)")
by = {}
for e in cuda:
    p = python_part(e)
    how = ("none" if p.startswith("[no recent Python sample]") else
           "cross" if "[launched by thread " in p else "own")
    k = (e.get("comm", "?"), how)
    by[k] = by.get(k, 0) + e["count"]
for (comm, how), n in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f"  {comm:16s} {how:6s} {n:7d}")
for e in sorted(joined, key=lambda e: -e["count"])[:3]:
    print(f"  {e['count']:7d}  {e['stack'][:400]}")
for e in sorted(cross, key=lambda e: -e["count"])[:3]:
    print(f"  {e['count']:7d}  ...{e['stack'][-500:]}")
# Forward launches come from the Python thread and carry its frames. The
# backward ones come from autograd's own threads: they must be lent the
# frames of the Python thread blocked in backward() (>= 90% of the launches
# of backward kernels; the rest may fall where the main thread was not off
# the CPU yet, or was preempted), and what crosses threads must be
# backward() (>= 90%). On an H200 (docs/validation-python.md) both are 100%.
ok = (launches > 0 and fwd > 0 and sum(e["count"] for e in cuda) == launches
      and n_bk > 0 and bk_ok >= 0.9 * n_bk and n_cross > 0
      and cross_bwd >= 0.9 * n_cross)
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PYEOF
