#!/bin/bash
# GPU validation of the python probe (run on the device machine, from the
# repository root, with the bundle from /work/shared/tools/device-bundle in
# BUNDLE): a PyTorch training loop (tests/gpu/python_train.py) under the
# machine's python3.12 runs 8 phases of STEPS steps; ntcore (python probe at
# the default 99 Hz, file sink folded + JSON) is attached with -p during the
# odd phases only. Reports: the interpreter, the attach message, median step
# time with and without sampling and their ratio, the in-kernel cost per
# sample, and the folded stacks' forward/backward frames. Results go to
# $OUT (or ./gpu-out). WIDTH and BATCH (environment) size the model.
# Usage: tests/gpu/python.sh BUNDLE [PYTHON] [STEPS]
set -euo pipefail

BUNDLE=${1:?usage: python.sh BUNDLE [PYTHON] [STEPS]}
PY=${2:-/opt/torch/.venv/bin/python3}
STEPS=${3:-300}
PHASES=8
O=${OUT:-$PWD/gpu-out}
mkdir -p "$O"
export NTCORE_PLUGIN_PATH=$BUNDLE/plugins:$BUNDLE/sinks
NT=$BUNDLE/core/ntcore
D=$(mktemp -d /tmp/ntcore-gpu-python.XXXXXX)
sysctl -qw kernel.bpf_stats_enabled=1 || true

echo "== interpreter"
"$PY" -c 'import sys, torch; print(sys.version.split()[0], sys.executable, "torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
real=$(readlink -f "$PY")
echo "binary: $real"
readelf -n "$real" 2>/dev/null | grep -c "function__entry" | sed 's/^/USDT function__entry notes: /' || true

cat >"$D/py.conf" <<CONF
plugins = (
  { plugin = "python"; required = true; },
  { plugin = "file"; name = "file.folded"; path = "$O/python-train.folded"; format = "folded"; events = [ "python.stack" ]; },
  { plugin = "file"; name = "file.json"; path = "$O/python-train.jsonl"; events = [ "python.*" ]; }
);
CONF

"$PY" tests/gpu/python_train.py "$D" "$PHASES" "$STEPS" "${WIDTH:-2048}" "${BATCH:-512}" &
W=$!
for _ in $(seq 6000); do [ -e "$D/ready" ] && break; sleep 0.05; done
[ -e "$D/ready" ] || { echo "workload did not start"; exit 1; }
BPFTOOL=$(command -v bpftool || echo "$BUNDLE/bpftool")
cost() { "$BPFTOOL" prog show -j 2>/dev/null | python3 -c "
import json, sys
t = c = 0
for p in json.load(sys.stdin):
    if p.get('name') == 'py_sample':
        t += p.get('run_time_ns', 0); c += p.get('run_cnt', 0)
print(t, c)" 2>/dev/null || echo "0 0"; }
: >"$D/costs"
for k in $(seq 0 $((PHASES - 1))); do
	if [ $((k % 2)) -eq 1 ]; then
		"$NT" -c "$D/py.conf" -p "$W" >"$D/nt.$k.log" 2>&1 &
		N=$!
		for _ in $(seq 3000); do grep -q "pid $W: CPython" "$D/nt.$k.log" && break; sleep 0.01; done
		grep "pid $W: CPython\|refus\|not sampling" "$D/nt.$k.log" | head -2
		read -r t0 c0 < <(cost)
	fi
	touch "$D/go.$k"
	for _ in $(seq 6000); do [ -e "$D/done.$k" ] && break; sleep 0.02; done
	if [ $((k % 2)) -eq 1 ]; then
		read -r t1 c1 < <(cost)
		echo "$((t1 - t0)) $((c1 - c0))" >>"$D/costs"
		kill -INT "$N"
		wait "$N" || true
		cat "$D/nt.$k.log" >>"$O/ntcore.log" 2>/dev/null || true
	fi
	cp "$D/done.$k" "$D/steps.$k"
done
wait "$W"
python3 - "$O" "$PHASES" "$D/costs" "$D" <<'PYEOF'
import statistics, sys
o, phases, costs, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
off, on = [], []
for k in range(phases):
    t = [float(x) for x in open("%s/steps.%d" % (d, k)).read().split()]
    (on if k % 2 else off).append(t)
    print("phase %d %-4s median %.4f ms mean %.4f ms" % (k, "on" if k % 2 else "off", statistics.median(t), statistics.mean(t)))
m_off = statistics.median([x for p in off for x in p])
m_on = statistics.median([x for p in on for x in p])
print("step time median: without %.4f ms, with sampling %.4f ms, ratio %.4f (%+.2f%%)"
      % (m_off, m_on, m_on / m_off, 100 * (m_on / m_off - 1)))
ns = cnt = 0
for l in open(costs):
    a, b = l.split(); ns += int(a); cnt += int(b)
if cnt:
    print("in-kernel cost: %d samples, %.0f ns per sample" % (cnt, ns / cnt))
folded = open("%s/python-train.folded" % o).read().splitlines()
tot = sum(int(l.rsplit(" ", 1)[1]) for l in folded)
fw = sum(int(l.rsplit(" ", 1)[1]) for l in folded if "Net.forward (" in l)
bw = sum(int(l.rsplit(" ", 1)[1]) for l in folded if "backward (" in l)
ts = sum(int(l.rsplit(" ", 1)[1]) for l in folded if "train_step (" in l)
print("folded: %d lines, %d samples; train_step %d, Net.forward %d, backward %d" % (len(folded), tot, ts, fw, bw))
for l in sorted(folded, key=lambda l: -int(l.rsplit(" ", 1)[1]))[:6]:
    print("  " + l[-220:])
PYEOF
grep -h "exited\|error" "$O/ntcore.log" | head -5 || true
rm -rf "$D"
