#!/usr/bin/env bash
# Runs every bench/<name>.sh; with --smoke each finishes in seconds (CI).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for b in bench/*.sh; do
  [ -e "$b" ] || continue
  [ "$(basename "$b")" = lib.sh ] && continue  # shared helpers, not a bench
  echo "=== $b $*"
  # Every bench takes [--smoke] [BUILD_ROOT].
  bash "$b" "$@" "$(cd "${BUILD:-build}" && pwd)" || { echo "bench $b failed"; status=1; }
done
exit $status
