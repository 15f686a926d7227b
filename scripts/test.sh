#!/usr/bin/env bash
# Runs the whole suite: every unit and integration test (integration tests
# need root: they load real BPF against real kernel activity), then the unit
# tests again under valgrind. An integration test that fails is run once
# more and, if it passes then, is named as flaky in the summary (it is not
# hidden); a test that fails twice fails the run. A test may skip (exit 77)
# only with a "SKIP <name>: <reason>" line, repeated in the summary. Ends
# with one "N passed, N failed, N skipped" line.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
logs=$build/meson-logs
[ "$(id -u)" = 0 ] || echo "warning: not root: the integration tests will fail (they load BPF)" >&2

meson test -C "$build" --print-errorlogs --num-processes 1 "$@"
cp "$logs/testlog.json" "$logs/testlog-main.json" 2>/dev/null

# Integration tests that failed get one more run.
mapfile -t again < <(python3 - "$logs/testlog-main.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    # names read "project:suite+suite / test"
    suites, _, test = r["name"].partition(" / ")
    if r["result"] not in ("OK", "EXPECTEDFAIL", "SKIP") and \
            "integration" in suites.split(":", 1)[-1].split("+"):
        print(test)
PY
)
rm -f "$logs/testlog-again.json"
if ((${#again[@]})); then
  echo "=== running again once: ${again[*]}"
  meson test -C "$build" --print-errorlogs --num-processes 1 "${again[@]}"
  cp "$logs/testlog.json" "$logs/testlog-again.json"
fi

# Tests that already run under valgrind (suite valgrind) are not wrapped twice.
meson test -C "$build" --setup valgrind --suite unit --no-suite valgrind --print-errorlogs --num-processes 2

python3 - "$logs/testlog-main.json" "$logs/testlog-again.json" "$logs/testlog-valgrind.json" <<'PY'
import json, os, sys
def load(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path)]
main, again, valgrind = (load(p) for p in sys.argv[1:])
ok = lambda r: r["result"] in ("OK", "EXPECTEDFAIL")
second = {r["name"]: r for r in again}
passed = failed = skipped = 0
for r in main + valgrind:
    if r["result"] == "SKIP":
        # A skip must say why, in one "SKIP <name>: <reason>" line (only a
        # dependency plain Debian cannot provide may skip); a silent one fails.
        why = [l for l in (r.get("stdout") or "").splitlines() if l.startswith("SKIP ")]
        if why:
            skipped += 1
            for line in why:
                print(line)
        else:
            failed += 1
            print("FAILED (skipped without a SKIP line):", r["name"])
    elif ok(r):
        passed += 1
    elif r["name"] in second and ok(second[r["name"]]):
        passed += 1
        print("FLAKY (failed, then passed on its second run):", r["name"])
    else:
        failed += 1
        print("FAILED:", r["name"])
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
