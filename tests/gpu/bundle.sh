#!/bin/bash
# DEVICE_BUNDLE overrides where the shared device-bundle tool is.
# Builds what the GPU validation scripts need and bundles it, with the shared
# libraries it loads, into .device/ for the device machine:
#   tests/gpu/bundle.sh [BUILD_DIR]      (run here, from the repository root)
# then, on the device machine (carry [".device"]):
#   . .device/env.sh; tests/gpu/cuda_validate.sh .device "$OUT"
#   . .device/env.sh; tests/gpu/cupti.sh .device "$OUT"
#   . .device/env.sh; tests/gpu/trace.sh .device "$OUT"
#   (ALL=1) . .device/env.sh; bash tests/gpu/overhead.sh .device "$OUT"
set -euo pipefail
B=${1:-/tmp/gpubuild}
S=$(mktemp -d /tmp/gpubundle.XXXXXX)
trap 'rm -rf "$S"' EXIT
# ALL=1: every plugin (tests/gpu/training_conf.sh, tests/gpu/anomaly.sh); else what the cuda,
# detectors, python, nvlink and trace checks need.
if [ "${ALL:-0}" = 1 ]; then plugins=all; else plugins=cuda,nvlink,python,stdout,file,trace; fi
[ -f "$B/build.ninja" ] || meson setup "$B" -Dplugins=$plugins >/dev/null
ninja -C "$B" >/dev/null
mkdir -p "$S/core" "$S/plugins/cuda/detectors" "$S/plugins/python" "$S/plugins/nvlink" "$S/sinks/file" \
	"$S/sinks/stdout" "$S/sinks/trace"
cp "$B/core/ntcore" "$S/core/"
cp "$B/plugins/cuda/cuda.so" "$B/plugins/cuda/cuda_libinfo" "$S/plugins/cuda/"
# cuda_gpu finds its CUPTI injection library next to itself
cp "$B/plugins/cuda/cuda_gpu.so" "$B/plugins/cuda/libntcore-cupti.so.1" "$S/plugins/cuda/"
# tests/gpu/cupti.sh's floor: CUPTI counting records, nothing else
mkdir -p "$S/bench"
cp "$B/bench/libcupti-raw.so" "$S/bench/"
cp "$B"/plugins/cuda/detectors/*.so "$S/plugins/cuda/detectors/"
cp "$B/plugins/python/python.so" "$S/plugins/python/"
cp "$B/plugins/nvlink/nvlink.so" "$S/plugins/nvlink/"
cp "$B/sinks/file/file.so" "$S/sinks/file/"
cp "$B/sinks/stdout/stdout.so" "$S/sinks/stdout/"
cp "$B/sinks/trace/trace.so" "$S/sinks/trace/"
if [ "${ALL:-0}" = 1 ]; then
	for p in sched mem io net anomaly; do
		mkdir -p "$S/plugins/$p" && cp "$B/plugins/$p/$p.so" "$S/plugins/$p/"
	done
	for p in prometheus grpc; do
		mkdir -p "$S/sinks/$p" && cp "$B/sinks/$p/$p.so" "$S/sinks/$p/"
	done
fi
# bpftool: tests/gpu/overhead.sh names each BPF program in its breakdown
bt=$(command -v bpftool || true)
if [ -n "$bt" ]; then mkdir -p "$S/bin" && cp "$bt" "$S/bin/"; fi
rm -rf .device
"${DEVICE_BUNDLE:-../shared/tools/device-bundle}" "$S" .device
ex=$(git rev-parse --git-path info/exclude) # .git is a file in a worktree
grep -qx '/.device/' "$ex" 2>/dev/null || echo '/.device/' >> "$ex"
