#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs one libFuzzer harness for SECONDS from its committed corpus (read,
# never written: new inputs go to a scratch directory). A crash, a leak,
# an ASan or UBSan report, or a timeout fails the test, with the input that
# did it printed (hex) and kept in $FUZZ_ARTIFACTS (default /tmp).
# Usage: run.sh FUZZER CORPUS_DIR SECONDS
set -uo pipefail
fz=${1:?fuzzer} corpus=${2:?corpus dir} secs=${3:-20}
name=$(basename "$fz")
keep=${FUZZ_ARTIFACTS:-/tmp}
work=$(mktemp -d "/tmp/$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/new" "$corpus"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")/.." && pwd)/lsan.supp:print_suppressions=0}
"$fz" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
	-close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$work/" \
	"$work/new" "$corpus" >"$work/log" 2>&1
rc=$?
grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" "$work/log" | tail -4
if [ $rc != 0 ]; then
	tail -60 "$work/log"
	for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
		[ -e "$a" ] || continue
		cp "$a" "$keep/$name-$(basename "$a")"
		echo "input kept as $keep/$name-$(basename "$a"):"
		od -A d -t x1 "$a" | head -20
	done
	echo "$name: FAILED (rc $rc)"
	exit 1
fi
echo "$name: $(grep -c . <(ls "$corpus")) corpus inputs, $(ls "$work/new" | wc -l) new, no finding in $secs s"
