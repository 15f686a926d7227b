#!/bin/bash
# GPU check of the python probe's CUDA join: with the cuda probe (launch
# events) and the python probe both loaded, kernel launches are attributed to
# the Python frames that issued them (python.stack, state "cuda"), so the
# flame graph shows the model's forward and backward above the kernels.
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
t = time.time()
while time.time() - t < 4:
    train_step(net, opt, x, y)
torch.cuda.synchronize()
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
print(f"cuda.launch events {launches}; joined with Python frames {n_joined} "
      f"({100.0 * n_joined / max(launches, 1):.1f}%); under Net.forward {fwd}; "
      f"under a Python backward() call {bwd}")
for e in sorted(joined, key=lambda e: -e["count"])[:3]:
    print(f"  {e['count']:7d}  {e['stack'][:400]}")
# Forward launches come from the Python thread and must carry its frames;
# backward ones come from autograd's own threads (see docs/python.md).
ok = launches > 0 and fwd > 0 and sum(e["count"] for e in cuda) == launches
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PYEOF
