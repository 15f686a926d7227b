#!/bin/bash
# SPDX-License-Identifier: MIT
# Benchmark of the gRPC (OTLP) sink: events per second exported to a local
# OTLP receiver and ntcore's CPU cost per 100k events, side by side with the
# generator alone and with the file sink (JSON Lines to /dev/null).
# Usage: bench/grpc.sh [--smoke] [BUILD_ROOT]   (default build root: ./build)
#   --smoke  20k events, no gzip run (< 30 s; what CI runs)
#   default  200k events, plus a gzip run
set -euo pipefail
mode=full
n=200000
if [ "${1:-}" = "--smoke" ]; then
	mode=smoke
	n=20000
	shift
fi
S=$(realpath "$(dirname "$0")/..")
B=$(realpath "${1:-$S/build}")
[ -x "$B/core/ntcore" ] || { echo "bench/grpc.sh: $B/core/ntcore not built" >&2; exit 1; }
[ -f "$B/sinks/grpc/grpc.so" ] && [ -f "$B/sinks/grpc/grpc_testgen.so" ] ||
	{ echo "bench/grpc.sh: build with -Dplugins=...,grpc (grpc.so, grpc_testgen.so)" >&2; exit 1; }
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null ||
	{ echo "bench/grpc.sh: needs python3-grpcio and python3-protobuf" >&2; exit 1; }
command -v protoc >/dev/null || { echo "bench/grpc.sh: needs protoc (protobuf-compiler)" >&2; exit 1; }
echo "gRPC sink benchmark ($mode), $(nproc) CPUs, $(uname -r)"
exec /usr/bin/python3 "$S/bench/grpc/run_bench.py" "$B" "$S" "$n" "$mode"
