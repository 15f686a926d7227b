#!/usr/bin/env bash
# Runs the whole suite: every unit and integration test (integration tests
# need root: they load real BPF), then the unit tests again under valgrind.
# Ends with one "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
[ "$(id -u)" = 0 ] || echo "warning: not root: the integration tests will fail (they load BPF)" >&2

status=0
meson test -C "$build" --print-errorlogs --num-processes 1 "$@" || status=1
cp "$build/meson-logs/testlog.json" "$build/meson-logs/testlog-main.json" 2>/dev/null
# Tests that already run under valgrind (suite valgrind) are not wrapped twice.
meson test -C "$build" --setup valgrind --suite unit --no-suite valgrind --print-errorlogs --num-processes 2 || status=1

python3 - "$build/meson-logs/testlog-main.json" "$build/meson-logs/testlog-valgrind.json" <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        r = json.loads(line)
        if r["result"] in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r["result"] == "SKIP":
            skipped += 1
        else:
            failed += 1
            print("FAILED:", r["name"], "(%s)" % path.rsplit("-", 1)[-1][:-5])
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
