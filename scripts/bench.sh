#!/usr/bin/env bash
# Runs every bench/<name>.sh; with --smoke each finishes in seconds (CI).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
for b in bench/*.sh; do
  [ -e "$b" ] || continue
  echo "=== $b $*"
  BUILD=${BUILD:-build} bash "$b" "$@" || { echo "bench $b failed"; status=1; }
done
exit $status
