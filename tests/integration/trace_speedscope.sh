#!/bin/bash
# The trace sink's JSON variant opens in speedscope's importer without
# error. speedscope (npm package, pinned below) is installed at test time
# into a cache folder (NTCORE_NPM_CACHE, default /var/cache/ntcore-test/npm)
# with npm from the registry; where npm or the registry is unavailable the
# test is skipped (exit 77). Its importer runs in its own page, driven the
# way its CLI does it (index.html#localProfilePath=FILE.js, where the file
# calls speedscope.loadFileFromBase64), in headless Chromium over the
# DevTools protocol: the import must end with the profile loaded
# (document.title "NAME - speedscope"), one profile per thread with slices,
# and no console error, exception or alert() (speedscope's way to say
# "Unrecognized format"). Traces: the GPU fixture's scenario and a busy
# second of it, and the fixture CUDA workload under the cuda probe.
# Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
[ -f "$B/sinks/trace/trace.so" ] || fail "trace sink not built in $B"
command -v chromium >/dev/null || fail "chromium is needed (scripts/setup.sh installs it)"
PY=/usr/bin/python3
TR=$HERE/trace
SPEEDSCOPE_VERSION=1.25.0
skip() { echo "SKIP trace-speedscope: $*"; exit 77; }
nt_test_tmp nt-trace-ss

CACHE=${NTCORE_NPM_CACHE:-/var/cache/ntcore-test/npm}
SS=$CACHE/node_modules/speedscope/dist/release/index.html
if ! grep -qs "\"version\": \"$SPEEDSCOPE_VERSION\"" "$CACHE/node_modules/speedscope/package.json"; then
	command -v npm >/dev/null || skip "npm is not installed"
	mkdir -p "$CACHE"
	timeout 300 npm install --prefix "$CACHE" --no-audit --no-fund \
		"speedscope@$SPEEDSCOPE_VERSION" >"$T/npm.log" 2>&1 ||
		{ tail -5 "$T/npm.log"; skip "npm could not install speedscope@$SPEEDSCOPE_VERSION"; }
fi
[ -f "$SS" ] || fail "no $SS after npm install"

ntcore() { # NAME ARGS...
	local name=$1
	shift
	if ! timeout 120 "$NTCORE" -c "$T/$name.conf" "$@" >"$T/$name.out" 2>&1; then
		cat "$T/$name.out" >&2
		fail "$name: ntcore failed"
	fi
}

# import NAME JSON: speedscope imports JSON; checks as above
import() {
	local name=$1 json=$2
	"$PY" - "$json" "$T/$name.js" <<'PY'
import base64, json, sys
data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "w") as f:
    f.write("speedscope.loadFileFromBase64(%s, %s)" % (
        json.dumps(sys.argv[1].rsplit("/", 1)[-1]), json.dumps(base64.b64encode(data).decode())))
PY
	"$PY" "$TR/cdp.py" "file://$SS#localProfilePath=$T/$name.js" --timeout 60 \
		--wait "document.title.endsWith(' - speedscope')" \
		--eval "document.title" --eval "document.body.innerText" \
		--screenshot "$T/$name.png" > "$T/$name.res" || fail "$name: chromium failed"
	"$PY" - "$T/$name.res" "$json" <<'PY' || fail "$name: speedscope import"
import json, re, sys
r = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
threads = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "X"}
name = sys.argv[2].rsplit("/", 1)[-1]
errs = []
if r["errors"] or r["dialogs"]:
    errs.append(f"errors {r['errors']} dialogs {r['dialogs']}")
if not r["waited"] or r["eval"][0] != f"{name} - speedscope":
    errs.append(f"not imported: title {r['eval'][0]!r}")
m = re.search(r"\(1/(\d+)\)", r["eval"][1] or "")
if not m or int(m.group(1)) != len(threads):
    errs.append(f"profiles: {m.group(0) if m else None}, want 1/{len(threads)} (threads with slices)")
if errs:
    sys.exit("\n".join(errs))
print(f"ok: {name}: imported, {len(threads)} profiles")
PY
}

mkdir -p "$T/s"
cat > "$T/s.conf" <<CONF
plugins = (
  { plugin = "trace_gpufx"; },
  { plugin = "trace"; dir = "$T/s"; prefix = "scenario"; format = "json"; report = false;
    counters = [ "ntcore_gpufx_*" ]; }
);
CONF
ntcore s -d 1
import scenario "$(ls "$T"/s/scenario-*.json)"
mkdir -p "$T/b"
cat > "$T/b.conf" <<CONF
plugins = (
  { plugin = "trace_gpufx"; mode = "busy"; rate = 5000; },
  { plugin = "trace"; dir = "$T/b"; prefix = "busy"; format = "json"; report = false; }
);
CONF
ntcore b -d 1
import busy "$(ls "$T"/b/busy-*.json)"

FX=$B/plugins/cuda
[ -x "$FX/cuda_workload" ] || fail "the fixture CUDA workload is needed (CUDA toolkit headers)"
mkdir -p "$T/c"
cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; launch_layer = "runtime"; launch_events = true; enter_events = true; },
  { plugin = "trace"; dir = "$T/c"; prefix = "cuda"; format = "json"; report = false; }
);
CONF
(unset LD_LIBRARY_PATH; ntcore c -- "$FX/cuda_workload")
import cuda "$(ls "$T"/c/cuda-*.json)"
echo "PASS"
