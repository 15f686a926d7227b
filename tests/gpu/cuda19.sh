#!/bin/bash
# GPU check of issue 19 (CUDA graphs, virtual memory, attach-time names,
# Python in alerts) and a re-run of cuda_validate.sh's launch-count check.
#
#   . .device/env.sh; bash tests/gpu/cuda19.sh [BUNDLE] [OUTDIR]
#
# BUNDLE: tests/gpu/bundle.sh's .device (ntcore, cuda.so, the detectors,
# python.so, the file sink); OUTDIR: $OUT by default. PYTHON (default
# /opt/torch/.venv/bin/python) has PyTorch with CUDA. About 4 minutes.
# Parts (each guarded: one failing does not stop the others):
#   validate  cuda_workload.py check under ntcore (stacks = true): launch
#             counts per kernel equal PyTorch's profiler; allocation stacks
#             root first, the CUDA function last
#   graphs    a torch.cuda.CUDAGraph replay loop and a torch.compile
#             (mode="reduce-overhead") model: launches per kernel in each
#             profiled window equal the profiler's
#   alerts    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True with the python
#             probe and the detectors: leak alert within 5 s of a growing
#             list, OOM alert live bytes within 1 % of memory_reserved(), and
#             the leak, OOM, error and hang alerts name the Python function
#   attach    ntcore -p to a training job running for over a minute: >= 95 %
#             of the launches named at the default layer and with
#             launch_layer = "both" (by method: load, symbol, join, memory),
#             the first run's names found by the second; unnamed handles'
#             memory probed (files/attach-handles.json)
# Output: $OUTDIR/summary.txt (PASS/FAIL per check), cuda19.log, files/*.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(cd "${1:-.device}" && pwd)
O=${2:-${OUT:-/tmp/cuda19}}
PY=${PYTHON:-/opt/torch/.venv/bin/python}
[ -x "$PY" ] || PY=python3
mkdir -p "$O/files"
W=$O/files
[ -f "$D/env.sh" ] && . "$D/env.sh"
NT=$D/core/ntcore
export NTCORE_PLUGIN_PATH=$D/plugins:$D/plugins/cuda/detectors:$D/sinks
export PYTHONUNBUFFERED=1
SUM=$O/summary.txt
: > "$SUM"
exec > >(tee -a "$O/cuda19.log") 2>&1
T0=$(date +%s)
say() { printf '\n### %s (t=%ss)\n' "$*" "$(( $(date +%s) - T0 ))"; }
# record a check's PASS/FAIL lines in the summary (its output is in the log)
record() { grep -E '^(PASS|FAIL) ' "$1" >> "$SUM" || echo "FAIL $2: no verdict (see cuda19.log)" >> "$SUM"; }

# C19_PARTS: the parts to run (default all): validate graphs alerts attach
C19_PARTS=${C19_PARTS:-validate graphs alerts attach}
want() { case " $C19_PARTS " in *" $1 "*) return 0;; esac; return 1; }

say "facts"
date -u
uname -r
nvidia-smi -L 2>&1 | head -2
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
[ -x "$NT" ] || { echo "FAIL setup: no $NT" | tee -a "$SUM"; exit 1; }

# the attach part's job starts first: it must run for a minute before the attach
if want attach; then
"$PY" "$HERE/cuda19_workload.py" job "$W/job.stop" > "$W/job.out" 2>&1 &
JOBPID=$!
JOB_T0=$(date +%s)
fi

if want validate; then
# ------------------------------------------------------------ validate ----
say "validate: launch counts vs PyTorch's profiler, root-first stacks"
cat > "$W/validate.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; stacks = true; },
  { plugin = "file"; path = "$W/validate.jsonl"; metrics = true; }
);
CONF
timeout 150 "$NT" -c "$W/validate.conf" -- "$PY" "$HERE/cuda_workload.py" check \
	"$W/validate-prof.json" > "$W/validate.out" 2>&1
echo "ntcore exit $?; $(grep -E '^check:|launches probed|rror' "$W/validate.out" | head -6)"
if [ -f "$W/validate-prof.json" ]; then
	"$PY" "$HERE/cuda_compare.py" "$W/validate.jsonl" "$W/validate-prof.json" "validate, layer auto" \
		> "$W/validate.cmp" 2>&1
	cat "$W/validate.cmp"
	if grep -q "verdict: PASS" "$W/validate.cmp"; then
		echo "PASS validate.launch_counts: $(grep -m1 '^==' "$W/validate.cmp")" >> "$SUM"
	else
		echo "FAIL validate.launch_counts: $(grep -m1 '^==' "$W/validate.cmp")" >> "$SUM"
	fi
	"$PY" "$HERE/cuda19_check.py" stacks "$W/validate.jsonl" > "$W/stacks.chk" 2>&1
	cat "$W/stacks.chk"; record "$W/stacks.chk" stacks
else
	tail -20 "$W/validate.out"
	echo "FAIL validate.launch_counts: the workload wrote no profile" >> "$SUM"
fi

fi
if want graphs; then
# -------------------------------------------------------------- graphs ----
say "graphs: CUDAGraph replays and torch.compile(mode=reduce-overhead)"
cat > "$W/graphs.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; interval_ms = 100; },
  { plugin = "file"; path = "$W/graphs.jsonl"; metrics = true; interval_ms = 200;
    events = [ "cuda.graph_launch", "cuda.library", "cuda.error" ]; }
);
CONF
timeout 240 "$NT" -c "$W/graphs.conf" -- "$PY" "$HERE/cuda19_workload.py" graphs \
	"$W/graphs-wl.json" > "$W/graphs.out" 2>&1
echo "ntcore exit $?; $(grep -E '^window|failed|launches probed|rror' "$W/graphs.out" | head -8)"
if [ -f "$W/graphs-wl.json" ]; then
	"$PY" "$HERE/cuda19_check.py" graphs "$W/graphs.jsonl" "$W/graphs-wl.json" > "$W/graphs.chk" 2>&1
	cat "$W/graphs.chk"; record "$W/graphs.chk" graphs
else
	tail -20 "$W/graphs.out"
	echo "FAIL graphs: the workload wrote no windows" >> "$SUM"
fi

fi
if want alerts; then
# -------------------------------------------------------------- alerts ----
say "alerts: expandable segments, Python frames in the detectors' alerts"
cat > "$W/alerts.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; stacks = true; enter_events = true; },
  { plugin = "python"; frequency = 99; },
  { plugin = "cuda_memleak"; window_ms = 250; windows = 8; threshold = 0.8;
    min_growth_bytes = 67108864; },
  { plugin = "cuda_oom"; },
  { plugin = "cuda_errors"; },
  { plugin = "cuda_hang"; timeout_ms = 3000; interval_ms = 500; },
  { plugin = "file"; path = "$W/alerts.jsonl";
    events = [ "alert.*", "cuda.alloc", "cuda.free", "cuda.error", "python.call_stack" ]; }
);
CONF
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 180 "$NT" -c "$W/alerts.conf" -- \
	"$PY" "$HERE/cuda19_workload.py" alerts "$W/alerts-wl.json" > "$W/alerts.out" 2>&1
echo "ntcore exit $?"
grep -E 'alerts done|rror|alert|warning' "$W/alerts.out" | cut -c1-300 | head -20
if [ -f "$W/alerts-wl.json" ]; then
	"$PY" "$HERE/cuda19_check.py" alerts "$W/alerts.jsonl" "$W/alerts-wl.json" > "$W/alerts.chk" 2>&1
	cat "$W/alerts.chk"; record "$W/alerts.chk" alerts
else
	tail -20 "$W/alerts.out"
	echo "FAIL alerts: the workload wrote no results" >> "$SUM"
fi

fi
if want attach; then
# -------------------------------------------------------------- attach ----
say "attach: -p to a job running for over a minute"
while [ $(( $(date +%s) - JOB_T0 )) -lt 65 ] && kill -0 "$JOBPID" 2>/dev/null; do sleep 1; done
if kill -0 "$JOBPID" 2>/dev/null; then
	echo "job pid $JOBPID, running for $(( $(date +%s) - JOB_T0 )) s: $(tail -1 "$W/job.out")"
	# 1: the default layer (driver): names from the learned or guessed
	# offset of the driver's function structs; 2: launch_layer = "both":
	# host stubs and the runtime -> driver join as well (docs/cuda.md)
	for run in attach attach-both; do
		layer=auto; [ $run = attach-both ] && layer=both
		cat > "$W/$run.conf" <<CONF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; interval_ms = 200; launch_layer = "$layer"; },
  { plugin = "file"; path = "$W/$run.jsonl"; metrics = true; interval_ms = 500;
    events = [ "cuda.library" ]; }
);
CONF
		timeout -s INT 12 "$NT" -c "$W/$run.conf" -p "$JOBPID" > "$W/$run.out" 2>&1
		echo "$run: ntcore exit $?; $(grep -E 'launches probed|rror' "$W/$run.out" | head -3)"
		grep -E 'attach-time names' "$W/$run.out" | sed "s/^/$run: /"
	done
	"$PY" "$HERE/cuda19_check.py" attach "$W/attach.jsonl" "$JOBPID" "$W/attach-handles.json" \
		"$W/attach-both.jsonl" > "$W/attach.chk" 2>&1
	cat "$W/attach.chk"; record "$W/attach.chk" attach
else
	echo "FAIL attach: the job died: $(tail -5 "$W/job.out")" | tee -a "$SUM"
fi
touch "$W/job.stop"
for _ in $(seq 1 30); do kill -0 "$JOBPID" 2>/dev/null || break; sleep 1; done
kill "$JOBPID" 2>/dev/null
wait "$JOBPID" 2>/dev/null

fi
say "summary"
gzip -f "$W"/*.jsonl 2>/dev/null
cat "$SUM"
npass=$(grep -c '^PASS' "$SUM"); nfail=$(grep -c '^FAIL' "$SUM")
echo "cuda19: $npass PASS, $nfail FAIL in $(( $(date +%s) - T0 )) s"
[ "$nfail" = 0 ]
