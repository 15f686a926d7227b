#!/bin/bash
# The trace sink on a real PyTorch training run (GPU machine):
#   . .device/env.sh; bash tests/gpu/trace.sh [BUNDLE] [OUTDIR]
# (BUNDLE: built by tests/gpu/bundle.sh, which includes the trace sink).
# 1. plain mode (cuda probe with launch events, cuda_gpu for GPU activity,
#    python probe): the run traced as Perfetto and as JSON at once; per
#    kernel name, the launch instants in each trace and the device slices
#    (cuda.kernel_exec) equal the cuda probe's launch counts, and every
#    joined kernel has its flow; prints the traces' size per second of run.
# 2. flight mode: SIGUSR1 halfway writes the recorder while the job runs;
#    the dump decodes and holds launches; the time the dump took.
# Writes trace.log, trace-check.json, flight.log and the report pages to
# OUTDIR ($OUT). About 2 minutes.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/trace-gpu}}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
STEPS=${STEPS:-400}
mkdir -p "$O"
W=$(mktemp -d /tmp/tracegpu.XXXXXX)
[ -f "$D/env.sh" ] && . "$D/env.sh"
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks PYTHONUNBUFFERED=1
[ -f "$D/sinks/trace/trace.so" ] || { echo "FAIL: no trace sink in $D (rebuild the bundle)"; exit 1; }
cat > "$W/train.py" <<'PYEOF'
import sys, time, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
            torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
            torch.nn.Linear(2048, 10))
    def forward(self, x):
        return self.layers(x)
def train_step(net, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
net = Net().cuda(); opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
x = torch.randn(1024, 2048, device="cuda"); y = torch.randint(0, 10, (1024,), device="cuda")
t0 = time.time()
steps = int(sys.argv[1])
for i in range(steps):
    train_step(net, opt, x, y)
    if i % 50 == 0:
        torch.cuda.synchronize()
    if i == steps // 2:
        print("HALFWAY", flush=True)
torch.cuda.synchronize()
print(f"RUN_S={time.time() - t0:.3f}")
PYEOF

# ---- 1. plain mode ---------------------------------------------------------
cat > "$W/plain.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_events = true; },
  { plugin = "cuda_gpu"; api_records = true; },
  { plugin = "python"; },
  { plugin = "trace"; dir = "$W"; prefix = "pf"; },
  { plugin = "trace"; name = "tj"; dir = "$W"; prefix = "js"; format = "json"; report = false; },
  { plugin = "file"; path = "$W/events.jsonl"; events = [ "alert.*" ]; metrics = true; }
);
CONF
start=$(date +%s.%N)
"$D/core/ntcore" -c "$W/plain.conf" -- "$PY" "$W/train.py" "$STEPS" > "$W/plain.out" 2> "$W/plain.err"
rc=$?
end=$(date +%s.%N)
cp "$W/plain.err" "$O/trace-plain.err"
cp "$W"/pf-*.html "$O/" 2>/dev/null
secs=$(grep -o 'RUN_S=[0-9.]*' "$W/plain.out" | cut -d= -f2)
{
	echo "ntcore exit $rc; training loop ${secs:-?} s, ntcore run $("$PY" -c "print(round($end - $start, 2))") s"
	"$PY" "$HERE/trace_check.py" "$W"/pf-*.pftrace "$W"/js-*.json "$W/events.jsonl" \
		"$("$PY" -c "print($end - $start)")" "$O/trace-check.json"
} 2>&1 | tee "$O/trace.log"

# ---- 2. flight mode, SIGUSR1 halfway ------------------------------------------
cat > "$W/flight.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_events = true; },
  { plugin = "cuda_gpu"; api_records = true; },
  { plugin = "python"; },
  { plugin = "trace"; mode = "flight"; dir = "$W/fl"; prefix = "fl"; window_s = 10; }
);
CONF
mkdir -p "$W/fl"
# The signal goes out when the job reports it is halfway through its steps
# (a fixed sleep missed a job that had already ended: start-up time varies).
"$D/core/ntcore" -c "$W/flight.conf" -- "$PY" "$W/train.py" "$((STEPS * 10))" > "$W/flight.out" 2> "$W/flight.err" &
npid=$!
for _ in $(seq 600); do grep -q HALFWAY "$W/flight.out" && break; sleep 0.1; done
t_sig=$(date +%s.%N)
kill -USR1 "$npid"
for _ in $(seq 100); do grep -q "flight recorder written: .*-signal" "$W/flight.err" && break; sleep 0.1; done
t_done=$(date +%s.%N)
wait "$npid"
rc=$?
cp "$W/flight.err" "$O/trace-flight.err"
cp "$W"/fl/*.html "$O/" 2>/dev/null
{
	echo "ntcore exit $rc; SIGUSR1 to 'written' logged: $("$PY" -c "print(round($t_done - $t_sig, 2))") s"
	ls -la "$W/fl"
	"$PY" -c "
import sys, collections; sys.path.insert(0, '$HERE'); import trace_check as t
tracks, ev = t.load_perfetto(sys.argv[1])
n = collections.Counter(a.get('kernel') for ty, _, nm, a, _, _ in ev if ty == 3 and 'Launch' in nm)
print(f'signal dump: {len(tracks)} tracks, {len(ev)} events, {sum(n.values())} launches of {len(n)} kernels')
print('PASS' if sum(n.values()) > 0 else 'FAIL')
" "$(ls "$W"/fl/fl-*-1-signal.pftrace 2>/dev/null || echo missing)"
} 2>&1 | tee "$O/flight.log"
rm -rf "$W"
