#!/usr/bin/env bash
# Selective build + installation + the out-of-tree SDK path, end to end:
#  1. configure and build only sched, stdout and file into a temporary prefix
#     and run that build's own tests (a subset build passes its tests);
#  2. meson install into the prefix;
#  3. build examples/hello-plugin (probe and detector) with pkg-config
#     pointed at the prefix only, and check no path into the source tree leaks
#     into its build;
#  4. run the installed ntcore with the installed hello plugins: their events
#     and alert land in the file sink;
#  5. systemd-analyze verify the installed unit.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/nt-install-XXXXXX)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
step() { echo "--- $*"; }

step "subset build (sched, stdout, file) into $P"
meson setup "$T/build" "$SRC" --prefix="$P" --libdir=lib -Dplugins=sched,stdout,file >"$T/setup.log"
ninja -C "$T/build" >"$T/ninja.log" || { tail -30 "$T/ninja.log"; exit 1; }
built() { [ -e "$T/build/plugins/$1/$1.so" ] || [ -e "$T/build/sinks/$1/$1.so" ]; }
for p in sched stdout file; do
  built $p || { echo "missing $p.so"; exit 1; }
done
for p in mem io net cuda python prometheus grpc; do
  if built $p; then echo "$p was built although not selected"; exit 1; fi
done
step "the subset build's own tests"
NTCORE_PLUGIN_PATH= meson test -C "$T/build" --suite core --print-errorlogs >"$T/test.log" 2>&1 ||
  { tail -40 "$T/test.log"; exit 1; }
grep -E "^Ok:" "$T/test.log"

step "meson install"
meson install -C "$T/build" >"$T/install.log"
for f in bin/ntcore include/ntcore/plugin.h include/ntcore/event.h include/ntcore/bpf.h \
         include/ntcore/bpf/common.bpf.h include/ntcore/bpf/vmlinux.h \
         lib/pkgconfig/ntcore-plugin.pc lib/ntcore/plugins/sched.so \
         etc/ntcore/conf.d/default.conf share/man/man8/ntcore.8 \
         share/man/man5/ntcore.conf.5 lib/systemd/system/ntcore.service; do
  [ -e "$P/$f" ] || { echo "not installed: $f"; exit 1; }
done

step "examples/hello-plugin against the installed SDK only"
cp -r "$SRC/examples/hello-plugin" "$T/hello"
export PKG_CONFIG_PATH=$P/lib/pkgconfig PKG_CONFIG_LIBDIR=$P/lib/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig
for part in probe detector; do
  meson setup "$T/hello-$part" "$T/hello/$part" --prefix="$P" >"$T/hello-$part.log"
  ninja -C "$T/hello-$part" install >>"$T/hello-$part.log" || { tail -30 "$T/hello-$part.log"; exit 1; }
  if grep -q "$SRC" "$T/hello-$part/compile_commands.json"; then
    echo "the $part build refers to the source tree:"; grep -o "$SRC[^ \"]*" "$T/hello-$part/compile_commands.json" | head -3
    exit 1
  fi
done
[ -e "$P/lib/ntcore/plugins/hello.so" ] && [ -e "$P/lib/ntcore/plugins/hello_watch.so" ]

step "the installed ntcore runs the installed example plugins"
cat >"$T/hello.conf" <<C
plugins = (
  { plugin = "hello"; },
  { plugin = "hello_watch"; watch = "true"; severity = 2; },
  { plugin = "file"; path = "$T/hello.jsonl"; }
);
C
env -u NTCORE_PLUGIN_PATH "$P/bin/ntcore" --list-plugins | grep -E "^  hello +probe +1\.1"
env -u NTCORE_PLUGIN_PATH "$P/bin/ntcore" -c "$T/hello.conf" -- sh -c '/bin/true; /bin/true; exec /bin/echo hi' >"$T/run.log" 2>&1 ||
  { cat "$T/run.log"; exit 1; }
python3 - "$T/hello.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
execs = [e["filename"] for e in ev if e["type"] == "hello.exec"]
alerts = [e for e in ev if e["type"] == "alert.hello_watch"]
assert execs.count("/bin/true") == 2 and "/bin/echo" in execs, execs
assert len(alerts) == 2 and alerts[0]["severity"] == 2, alerts
assert "ran /bin/true" in alerts[0]["message"], alerts[0]
print("hello.exec:", execs, "alerts:", len(alerts))
PY

step "systemd-analyze verify"
# --man=no: the pages are installed under the temporary prefix, not in man's path
systemd-analyze verify --man=no "$P/lib/systemd/system/ntcore.service"
grep -q "^ExecStart=$P/bin/ntcore " "$P/lib/systemd/system/ntcore.service"
echo "install: ok"
