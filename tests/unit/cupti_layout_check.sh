#!/bin/sh
# cupti_layout_check.sh: compile and run cupti_layout_check.c against the
# CUDA toolkit's CUPTI headers ($CUDA_HOME, default /usr/local/cuda); SKIP
# (exit 77) where there is no toolkit: ntcore itself needs none.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
inc=${CUDA_HOME:-/usr/local/cuda}/include
if [ ! -f "$inc/cupti_activity.h" ]; then
	echo "SKIP cupti_layout_check: no CUPTI headers at $inc (a CUDA toolkit is needed to compare layouts)"
	exit 77
fi
tmp=$(mktemp -d /tmp/cupti-layout.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -std=c11 -Wall -Werror -I"$inc" -o "$tmp/check" "$here/cupti_layout_check.c"
"$tmp/check"
