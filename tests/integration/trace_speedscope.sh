#!/bin/bash
# The trace sink's JSON variant opens in speedscope's importer without
# error. speedscope's release page comes from its npm tarball, pinned by
# version and sha512 (below), fetched from the registry at test time into a
# cache folder (NTCORE_NPM_CACHE, default /var/cache/ntcore-test/npm); only
# its static dist/release folder is used, so no node or npm is needed. The
# hash, not TLS, vouches for the bytes: where the machine's TLS chain cannot
# be verified (an egress proxy whose CA a fresh root lacks) the download is
# retried without verification and still must match. An unreachable registry
# fails the test. Its importer runs in its own page, driven the
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
# the npm registry's integrity of speedscope-1.25.0.tgz (base64 sha512)
SPEEDSCOPE_SHA512=cpf9HWTZf1ijLXBJrk87Ve/54tnYx6rlf0gUThvn3ook6h63hLXVOQiMf44PT+XoV503cPfvfiT5gP5vojp6Ag==
nt_test_tmp nt-trace-ss

CACHE=${NTCORE_NPM_CACHE:-/var/cache/ntcore-test/npm}
SS_DIR=$CACHE/speedscope-$SPEEDSCOPE_VERSION
SS=$SS_DIR/package/dist/release/index.html
if [ ! -f "$SS" ]; then
	mkdir -p "$CACHE"
	"$PY" "$HERE/fetch_pinned.py" \
		"https://registry.npmjs.org/speedscope/-/speedscope-$SPEEDSCOPE_VERSION.tgz" \
		"$SPEEDSCOPE_SHA512" "$T/speedscope.tgz" || fail "could not fetch speedscope $SPEEDSCOPE_VERSION"
	rm -rf "$SS_DIR.part" && mkdir -p "$SS_DIR.part"
	tar -xzf "$T/speedscope.tgz" -C "$SS_DIR.part" package/dist/release
	rm -rf "$SS_DIR" && mv "$SS_DIR.part" "$SS_DIR"
fi
[ -f "$SS" ] || fail "no $SS in the speedscope tarball"

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
ntcore = { identity_labels = [ "declared" ]; };
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
ntcore = { identity_labels = [ "declared" ]; };
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
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "cuda"; launch_layer = "runtime"; launch_events = true; enter_events = true; },
  { plugin = "trace"; dir = "$T/c"; prefix = "cuda"; format = "json"; report = false; }
);
CONF
(unset LD_LIBRARY_PATH; ntcore c -- "$FX/cuda_workload")
import cuda "$(ls "$T"/c/cuda-*.json)"
echo "PASS"
