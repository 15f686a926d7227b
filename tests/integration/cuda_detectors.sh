#!/bin/bash
# Integration test of the CUDA detectors (root, real BPF uprobes): planted-bug
# C workloads (tests/integration/cuda_detectors/*.c) linked against the
# fixture CUDA runtime run under `ntcore -c CONF -- CMD` with the cuda probe,
# all five detectors and the file sink; check.py asserts on the JSON lines.
#   leak    a leak of exactly 13288 bytes from leak_here(): the exit report
#           names 13288 bytes and leak_here, nothing else alerts
#   grow    1 MiB kept every 40 ms after a steady warm-up: an online growth
#           alert naming keep_tensor within 2 s of the growth's start
#   oom     a 64 GiB request on the 16 GiB fixture device: alert.cuda_oom
#           within 100 ms of the failed call, with the evidence (run without
#           and with the probe's stacks)
#   hang    1 s of work, then silence (idle, busy, a thread blocked inside a
#           synchronous copy): one alert.cuda_hang timeout..timeout+interval
#           after the last GPU activity, naming the blocked thread
#   frag    64 x 256 MiB, every other freed, 9 GiB fails: score >= 90,
#           31 holes, an SVG with every block, its holes and the failure
#   errors  50 double frees and 3 bad copies: one alert per (function, error)
#           at once with its stack, the repeats summed up at the end
#   clean   a clean job: no alert at all
# Usage: cuda_detectors.sh BUILD_ROOT [SCENARIO...]
#   CUDADET_KEEP_SVG=FILE keeps the frag scenario's picture.
set -euo pipefail

B=${1:?usage: cuda_detectors.sh BUILD_ROOT [SCENARIO...]}
shift
SCENARIOS=${*:-leak grow oom oom_launch hang frag errors clean}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/cuda_detectors
NTCORE=$B/core/ntcore
fail() { echo "FAIL cuda_detectors: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "must run as root (loads BPF)"
[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (build first)"
for so in cuda/cuda.so cuda/detectors/cuda_memleak.so cuda/detectors/cuda_oom.so \
	  cuda/detectors/cuda_errors.so cuda/detectors/cuda_frag.so \
	  cuda/detectors/cuda_hang.so; do
	[ -f "$B/plugins/$so" ] || fail "no $B/plugins/$so (build with -Dplugins=cuda,file)"
done
[ -f "$B/sinks/file/file.so" ] || fail "no file sink in $B/sinks/file"
command -v python3 >/dev/null || fail "python3 is needed"
CC=${CC:-cc}
command -v "$CC" >/dev/null || fail "a C compiler is needed to build the workloads"
# the fixture runtime and driver (tests/fixtures/cuda), built by plugins/cuda
FIX=${CUDA_FIXTURE_DIR:-$B/plugins/cuda}
[ -f "$FIX/libcudart.so.13" ] && [ -f "$FIX/libcuda.so.1" ] ||
	fail "no fixture libcudart.so.13/libcuda.so.1 in $FIX (build plugins/cuda first)"
# the CUDA declarations the fixtures build against (no toolkit needed)
FX_INC=$HERE/../fixtures/cuda
export NTCORE_PLUGIN_PATH=$B/plugins:$B/plugins/cuda/detectors:$B/sinks

T=$(mktemp -d /tmp/ntcore-cudadet.XXXXXX)
trap 'rm -rf "$T"' EXIT

for w in leak grow oom oom_launch hang frag errors clean; do
	"$CC" -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls \
		-rdynamic -I"$FX_INC" "$SRC/$w.c" -o "$T/$w" \
		-L"$FIX" -l:libcudart.so.13 -Wl,-rpath,"$FIX" -lpthread ||
		fail "cannot build workload $w"
done

# write_conf NAME MEMLEAK_KEYS OOM_KEYS ERRORS_KEYS FRAG_KEYS HANG_KEYS
write_conf() {
	local name=$1 ml=$2 oom=$3 er=$4 fr=$5 hg=$6
	cat >"$T/$name.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "cuda"; required = true; stacks = ${STACKS:-true}; launch_events = true;
    enter_events = true; },
  { plugin = "cuda_memleak"; required = true; $ml },
  { plugin = "cuda_oom"; required = true; $oom },
  { plugin = "cuda_errors"; required = true; $er },
  { plugin = "cuda_frag"; required = true; svg_path = "$T/$name-%p-dev%d.svg"; $fr },
  { plugin = "cuda_hang"; required = true; $hg },
  { plugin = "file"; path = "$T/$name.jsonl";
    events = [ "alert.*", "cuda_memleak.report", "cuda.alloc", "cuda.free",
               "cuda.launch", "cuda.memcpy", "cuda.sync", "cuda.error" ]; }
);
EOF
}

# run NAME WORKLOAD ARGS...: the workload's stdout goes to $T/NAME.out
run() {
	local name=$1 rc=0
	shift
	timeout 60 "$NTCORE" -c "$T/$name.conf" -- sh -c 'out=$1; shift; exec "$@" >"$out"' \
		sh "$T/$name.out" "$@" >"$T/$name.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		cat "$T/$name.log" >&2
		fail "$name: ntcore exited with $rc"
	fi
}

check() {
	python3 "$SRC/check.py" "$@" ||
		{ echo "--- ntcore log:" >&2; cat "$T/$1.log" >&2; fail "$1"; }
}

for s in $SCENARIOS; do
	case $s in
	leak)
		write_conf leak "" "" "" "" ""
		run leak "$T/leak"
		check leak "$T" ;;
	grow)
		write_conf grow "window_ms = 100; windows = 8; threshold = 0.8; min_growth_bytes = 4194304;" "" "" "" ""
		run grow "$T/grow"
		check grow "$T" ;;
	oom)
		# without stacks: the detector's own latency and the delivery
		STACKS=false write_conf oom-nostack "" "" "" "" ""
		run oom-nostack "$T/oom"
		check oom-nostack "$T"
		# with stacks: the whole pipeline, symbolization included
		write_conf oom "" "" "" "" ""
		run oom "$T/oom"
		check oom "$T" ;;
	oom_launch)
		# a launch record per launch, at the fixture's full launch rate:
		# the alerts may not wait behind them, none may be lost
		write_conf oom_launch "" "" "" "" ""
		sed -i 's/"cuda.launch", //' "$T/oom_launch.conf" # not written: counted
		run oom_launch "$T/oom_launch"
		check oom_launch "$T" ;;
	hang)
		for how in idle busy blocked; do
			write_conf hang-$how "" "" "" "" "timeout_ms = 1500; interval_ms = 250;"
			run hang-$how "$T/hang" $how 3000
			check hang-$how "$T" 1500 250
		done ;;
	frag)
		# the fixture's planted pattern read as an arena (holes hold
		# memory back); real GPUs use the default "paged" model
		write_conf frag "" "model = \"contiguous\";" "" "interval_ms = 200; model = \"contiguous\";" ""
		run frag "$T/frag"
		check frag "$T"
		if [ -n "${CUDADET_KEEP_SVG:-}" ]; then
			cp "$(ls "$T"/frag-*.svg | head -1)" "$CUDADET_KEEP_SVG"
		fi ;;
	errors)
		write_conf errors "" "" "interval_ms = 60000;" "" ""
		run errors "$T/errors"
		check errors "$T" ;;
	clean)
		write_conf clean "" "" "" "" "timeout_ms = 1000; interval_ms = 100;"
		run clean "$T/clean"
		check clean "$T" ;;
	*) fail "unknown scenario $s" ;;
	esac
	echo "ok cuda_detectors $s"
done
echo "PASS cuda_detectors"
