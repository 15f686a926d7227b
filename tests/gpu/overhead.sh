#!/bin/bash
# SPDX-License-Identifier: MIT
# ntcore's overhead on a GPU training host (issue 17, part 5; part 4's OOM
# latency), in one batch of about 6-8 minutes (BUDGET_S, default 500 s):
#   1. training.conf (-p, every plugin) on four workloads, each the median
#      of PAIRS (10) interleaved pairs of windows inside one process:
#      mlp, cnn (bf16), gpt (GPT-style decoder, bf16 autocast, AdamW,
#      >= 20 ms per step), loader (DataLoader, 4 worker processes reading
#      one file per sample); target +1 % step time;
#   2. each plugin of training.conf alone on gpt (PLUGIN_PAIRS, 8 pairs),
#      with the kernel time of its BPF programs per step (bpf_stats): each
#      plugin's share;
#   3. a launch-bound loop (2000 tiny kernels per step) under the cuda
#      probe with training.conf's settings: target +8 %;
#   4. the OOM alert's latency with launch_events on while another thread
#      launches nonstop: target <= 10 ms after the failed call;
#   and ntcore's peak RSS under training.conf (target <= 64 MB).
# How: overhead_drive.py's header (in-process interleaving: ntcore -p PID
# attached for one window, detached for the next, order flipped every pair,
# the workload and ntcore pinned to separate CPUs, a window starting only
# once ntcore sent READY=1). Results under OUT: summary.txt (printed at the
# end), results.jsonl (every pair), overhead.log, ntcore.log, work-*.err.
# Usage (device machine, repository root; bundle: ALL=1 tests/gpu/bundle.sh):
#   . .device/env.sh; bash tests/gpu/overhead.sh [.device] [OUTDIR]
# Dry run without a GPU or torch (the driver with a sleeping workload):
#   DRY=1 bash tests/gpu/overhead.sh BUILD_DIR /tmp/ovh
# OVH_ONLY="oom launch" runs only those workloads (names as in the plan);
# OVH_STATS=1 adds training.conf with BPF statistics on gpt (each program);
# OVH_PLUGINS="cuda nvlink" measures only those plugins alone;
# OVH_ALONE_ALL=1 measures them alone on every workload, not only gpt.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/ntcore-overhead}}
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
DRY=${DRY:-0}
mkdir -p "$O"
: >"$O/overhead.log"; : >"$O/results.jsonl"; : >"$O/ntcore.log"
T=$(mktemp -d /tmp/ntcore-overhead.XXXXXX)
trap 'rm -rf "$T"' EXIT
[ -f "$D/env.sh" ] && . "$D/env.sh"
if [ -x "$D/core/ntcore" ]; then NT=$D/core/ntcore; else NT=$D/ntcore; fi
[ -x "$NT" ] || { echo "no ntcore in $D"; exit 1; }
export NTCORE_PLUGIN_PATH=$D/plugins:$D/sinks
[ "$(id -u)" -eq 0 ] || { echo "must run as root (BPF)"; exit 1; }
sysctl -qw kernel.bpf_stats_enabled=0 || true
command -v taskset >/dev/null || { echo "needs taskset (util-linux)"; exit 1; }
# bpftool names each BPF program in the per-plugin breakdown (bundled)
BPFTOOL=$(command -v "$D/bin/bpftool" bpftool 2>/dev/null | head -1)
NCPU=$(nproc)
# ntcore on the first CPUs, the workload (and its DataLoader workers) on the rest
NT_CPUS=${NT_CPUS:-0-$(((NCPU >= 8 ? 4 : 2) - 1))}
WORK_CPUS=${WORK_CPUS:-$((NCPU >= 8 ? 4 : 0))-$((NCPU - 1))}

echo "== $(date -u +%FT%TZ) $(uname -r), $NCPU CPUs; ntcore $("$NT" --version 2>&1 | head -1)"
[ "$DRY" = 1 ] || "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, torch.cuda.get_device_name(0))'

# training.conf, and each of its plugins alone with its file sink
cp "$ROOT/conf.d/training.conf" "$T/training.conf"
sinkline=$(python3 - "$ROOT/conf.d/training.conf" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'\{ plugin = "file"; path = "ntcore-training.jsonl".*?\];\s*\},', text, re.S)
print(m.group(0).rstrip(",") if m else '{ plugin = "file"; path = "ntcore-training.jsonl"; }')
PY
)
PLUGINS=${OVH_PLUGINS:-"sched mem io net cuda nvlink python"}
for p in $PLUGINS; do
	line=$(grep -E "^\s*\{ plugin = \"$p\";" "$ROOT/conf.d/training.conf" | sed 's/#.*//')
	printf 'plugins = (\n  %s\n  %s\n);\n' "$line" "$sinkline" >"$T/$p.conf"
done
cuda_line=$(grep -E '^\s*\{ plugin = "cuda";' "$ROOT/conf.d/training.conf" | sed 's/#.*//; s/ *},* *$//')
cat >"$T/oom.conf" <<C
plugins = (
  $cuda_line launch_events = true; },
  { plugin = "cuda_oom"; },
  { plugin = "file"; path = "$T/oom.jsonl"; events = [ "alert.*" ]; }
);
C

PAIRS=${PAIRS:-12} PLUGIN_PAIRS=${PLUGIN_PAIRS:-6}
python3 - "$T/plan.json" <<PY
import json, sys
T, pairs, ppairs, dry = "$T", $PAIRS, $PLUGIN_PAIRS, "$DRY" == "1"
train = ["training", T + "/training.conf", pairs, False]
alone = [[p, "%s/%s.conf" % (T, p), ppairs, True] for p in "$PLUGINS".split()]
if "${OVH_STATS:-0}" == "1":  # training.conf with BPF statistics: every program's share
    alone.insert(0, ["training-stats", T + "/training.conf", ppairs, True])
more = alone if "${OVH_ALONE_ALL:-0}" == "1" else []  # each plugin alone on every workload
if dry:
    plan = [{"workload": "fake", "window_s": 0.5, "configs":
             [["training", T + "/training.conf", 2, False], ["sched", T + "/sched.conf", 2, True]]}]
else:
    plan = [
        {"workload": "gpt", "window_s": 1.0, "configs": [train] + alone},
        {"workload": "launch", "window_s": 0.6, "configs": [["cuda-launch", T + "/cuda.conf", pairs + 2, False]]},
        {"workload": "oom", "conf": T + "/oom.conf"},
        {"workload": "mlp", "window_s": 0.8, "configs": [train] + more},
        {"workload": "cnn", "window_s": 0.8, "configs": [train] + more},
        {"workload": "loader", "window_s": 1.0, "configs": [train] + more},
    ]
only = "${OVH_ONLY:-}".split()  # OVH_ONLY="oom gpt": those workloads only
if only:
    plan = [p for p in plan if p["workload"] in only]
json.dump({"out": "$O", "tmp": T, "nt": "$NT", "py": "$PY" if not dry else sys.executable,
           "bpftool": "$BPFTOOL",
           "work": "$HERE/overhead_work.py", "nt_cpus": "$NT_CPUS", "work_cpus": "$WORK_CPUS",
           "budget_s": float("${BUDGET_S:-500}"), "plan": plan,
           # the launch loop's +8 % is the cuda probe's; training.conf's +1 %
           "limits": {"training": 1.0, "cuda-launch": 8.0}}, open(sys.argv[1], "w"), indent=1)
PY
python3 "$HERE/overhead_drive.py" "$T/plan.json"
rc=$?
sysctl -qw kernel.bpf_stats_enabled=0 || true
exit $rc
