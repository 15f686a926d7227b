#!/bin/bash
# The headline use on a real GPU: `ntcore -c conf.d/training.conf -- python
# train.py` with every plugin loaded (sched, mem, io, net, cuda and its five
# detectors, python, stdout, two file sinks, prometheus). A PyTorch training
# loop runs alone, then under ntcore, then alone again; the step time with
# ntcore is compared with the mean of the two bare runs, and the outputs are
# checked: every plugin attached, kernel launches counted, Python stacks
# joined with kernels, a flame graph written, a /metrics scrape, no alert.
#   tests/gpu/training_conf.sh [BUNDLE] [OUTDIR]   (BUNDLE: tests/gpu/bundle.sh ALL=1)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/training-conf}}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
STEPS=${STEPS:-300}
mkdir -p "$O"
W=$(mktemp -d /tmp/trainconf.XXXXXX)
[ -f "$D/env.sh" ] && . "$D/env.sh"
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks PYTHONUNBUFFERED=1
cat > "$W/train.py" <<'PYEOF'
import json, statistics, sys, time, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
            torch.nn.Linear(4096, 10))
    def forward(self, x):
        return self.layers(x)
def train_step(net, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
net = Net().cuda(); opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
x = torch.randn(2048, 4096, device="cuda"); y = torch.randint(0, 10, (2048,), device="cuda")
for _ in range(20):
    train_step(net, opt, x, y)
torch.cuda.synchronize()
times = []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    train_step(net, opt, x, y)
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"median_ms": statistics.median(times), "steps": len(times)}))
PYEOF
run_bare() { "$PY" "$W/train.py" "$STEPS" | tail -1; }
b1=$(run_bare)
cd "$W" && sed "s|127.0.0.1:9478|127.0.0.1:9478|" "$ROOT/conf.d/training.conf" > "$W/training.conf"
( sleep 12; curl -s http://127.0.0.1:9478/metrics > "$W/scrape.txt" 2>/dev/null ||
  "$PY" -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:9478/metrics").read().decode())' > "$W/scrape.txt" ) &
"$D/core/ntcore" -c "$W/training.conf" -- "$PY" "$W/train.py" "$STEPS" > "$W/nt.out" 2> "$W/nt.err"
rc=$?
wait
b2=$(run_bare)
cd "$W"
nt=$(grep '^{"median_ms"' "$W/nt.out" | tail -1)
cp "$W/nt.err" "$O/training-conf.err"
"$PY" - "$b1" "$b2" "$nt" "$rc" <<'PYEOF' | tee "$O/training-conf.log"
import json, sys
b1, b2, nt = (json.loads(a) for a in sys.argv[1:4]); rc = int(sys.argv[4])
base = (b1["median_ms"] + b2["median_ms"]) / 2
over = 100.0 * (nt["median_ms"] / base - 1)
print(f"step median: bare {b1['median_ms']:.3f} / {b2['median_ms']:.3f} ms, under training.conf {nt['median_ms']:.3f} ms: {over:+.2f}%")
ev = [json.loads(l) for l in open("ntcore-training.jsonl")]
types = {}
for e in ev:
    types[e["type"]] = types.get(e["type"], 0) + 1
alerts = [e for e in ev if e["type"].startswith("alert.")]
launches = sum(e["value"] for e in ev if e["type"] == "metric" and e["name"] == "ntcore_cuda_launches_total")
states = {}
for e in ev:
    if e["type"] == "metric" and e["name"] == "ntcore_plugin_state":
        states[e["labels"]["plugin"]] = e["labels"]["state"]
folded = open("ntcore-training.folded").read().splitlines()
fwd = sum(int(l.rsplit(" ", 1)[1]) for l in folded if "Net.forward" in l)
scrape = open("scrape.txt").read() if __import__("os").path.exists("scrape.txt") else ""
print(f"ntcore exit {rc}; event types: {dict(sorted(types.items()))}")
print(f"plugin states at the last snapshot: {states}")
print(f"kernel launches counted: {launches:.0f}; flame graph lines {len(folded)}, samples under Net.forward {fwd}")
print(f"/metrics scrape: {len(scrape.splitlines())} lines, ntcore_cuda_launches_total present: {'ntcore_cuda_launches_total' in scrape}")
print(f"alerts: {len(alerts)} {[a['message'] for a in alerts][:3]}")
ok = (rc == 0 and launches > 0 and fwd > 0 and not alerts and abs(over) < 3.0
      and all(s in ("attached", "detached") for s in states.values()) and len(states) >= 15)
print("PASS" if ok else "FAIL")
PYEOF
