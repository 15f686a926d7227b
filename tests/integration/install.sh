#!/usr/bin/env bash
# Selective build + installation + the out-of-tree SDK path, end to end:
#  1. configure and build only sched, stdout and file into a temporary prefix
#     and run that build's own tests (a subset build passes its tests);
#     stdout builds without file; a -Dplugins name with no folder is refused;
#  2. meson install into the prefix;
#  3. build examples/hello-plugin (probe and detector) with pkg-config
#     pointed at the prefix only, and check no path into the source tree leaks
#     into its build; both link the installed plugin kit (libntcore-kit.a)
#     and export nothing but their descriptor;
#  4. run the installed ntcore with the installed hello plugins: their events
#     and alert land in the file sink, with the probe's tracepoint chosen by
#     the kit (tp_btf where the kernel has BTF), and once more forced to
#     raw_tp;
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
step "-Dplugins=sched,stdout: stdout builds without the file sink"
meson setup "$T/build2" "$SRC" -Dplugins=sched,stdout >"$T/setup2.log" ||
  { tail -20 "$T/setup2.log"; exit 1; }
ninja -C "$T/build2" sinks/stdout/stdout.so plugins/sched/sched.so >"$T/ninja2.log" ||
  { tail -30 "$T/ninja2.log"; exit 1; }
rm -rf "$T/build2"

step "-Dplugins= refuses a name with no folder"
if meson setup "$T/build3" "$SRC" -Dplugins=sched,nosuchplugin >"$T/setup3.log" 2>&1; then
  echo "-Dplugins=sched,nosuchplugin was accepted"; exit 1
fi
grep -F 'no plugin or sink named "nosuchplugin"' "$T/setup3.log" ||
  { tail -20 "$T/setup3.log"; exit 1; }
rm -rf "$T/build3"

step "the subset build's own tests"
NTCORE_PLUGIN_PATH= meson test -C "$T/build" --suite core --print-errorlogs >"$T/test.log" 2>&1 ||
  { tail -40 "$T/test.log"; exit 1; }
grep -E "^Ok:" "$T/test.log"

step "meson install"
meson install -C "$T/build" >"$T/install.log"
for f in bin/ntcore include/ntcore/plugin.h include/ntcore/event.h include/ntcore/bpf.h \
         include/ntcore/bpf/common.bpf.h include/ntcore/bpf/vmlinux.h \
         include/ntcore/kit.h include/ntcore/kit/tp.h include/ntcore/kit/sb.h \
         lib/libntcore-kit.a \
         lib/pkgconfig/ntcore-plugin.pc lib/ntcore/plugins/sched.so \
         etc/ntcore/conf.d/default.conf share/man/man8/ntcore.8 \
         share/man/man5/ntcore.conf.5 lib/systemd/system/ntcore.service; do
  [ -e "$P/$f" ] || { echo "not installed: $f"; exit 1; }
done

step "examples/hello-plugin against the installed SDK only"
cp -r "$SRC/examples/hello-plugin" "$T/hello"
multiarch=$(cc -print-multiarch)   # x86_64-linux-gnu, aarch64-linux-gnu
export PKG_CONFIG_PATH=$P/lib/pkgconfig PKG_CONFIG_LIBDIR=$P/lib/pkgconfig:/usr/lib/$multiarch/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig
for part in probe detector; do
  meson setup "$T/hello-$part" "$T/hello/$part" --prefix="$P" >"$T/hello-$part.log"
  ninja -C "$T/hello-$part" install >>"$T/hello-$part.log" || { tail -30 "$T/hello-$part.log"; exit 1; }
  if grep -q "$SRC" "$T/hello-$part/compile_commands.json"; then
    echo "the $part build refers to the source tree:"; grep -o "$SRC[^ \"]*" "$T/hello-$part/compile_commands.json" | head -3
    exit 1
  fi
done
[ -e "$P/lib/ntcore/plugins/hello.so" ] && [ -e "$P/lib/ntcore/plugins/hello_watch.so" ]
for so in hello hello_watch; do
  # The kit is linked in (its code is there) and hidden (one export).
  nm "$P/lib/ntcore/plugins/$so.so" | grep -q " t nt_sb_u64\| t nt_kit_log" ||
    { echo "$so.so: no plugin-kit code in it"; exit 1; }
  exports=$(nm -D --defined-only "$P/lib/ntcore/plugins/$so.so" | awk '$2 != "A" {print $3}' | grep -v '^_' | tr '\n' ' ')
  [ "$exports" = "ntcore_plugin " ] || { echo "$so.so exports: $exports"; exit 1; }
done

step "the installed ntcore runs the installed example plugins"
cat >"$T/hello.conf" <<C
plugins = (
  { plugin = "hello"; },
  { plugin = "hello_watch"; watch = "true"; severity = 2; },
  { plugin = "file"; path = "$T/hello.jsonl"; }
);
C
env -u NTCORE_PLUGIN_PATH "$P/bin/ntcore" --list-plugins | grep -E "^  hello +probe +1\.[0-9]+ "
env -u NTCORE_PLUGIN_PATH "$P/bin/ntcore" -c "$T/hello.conf" -- sh -c '/bin/true; /bin/true; exec /bin/echo hi' >"$T/run.log" 2>&1 ||
  { cat "$T/run.log"; exit 1; }
flavour=raw_tp
[ -r /sys/kernel/btf/vmlinux ] && flavour=tp_btf
grep -F "[probe:hello.0] attached to sched_process_exec ($flavour)" "$T/run.log" ||
  { echo "the kit did not choose $flavour:"; cat "$T/run.log"; exit 1; }
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

step "the example probe forced to raw_tp"
cat >"$T/hello-raw.conf" <<C
plugins = (
  { plugin = "hello"; attach = "raw_tp"; },
  { plugin = "file"; path = "$T/hello-raw.jsonl"; }
);
C
env -u NTCORE_PLUGIN_PATH "$P/bin/ntcore" -c "$T/hello-raw.conf" -- sh -c '/bin/true; exec /bin/echo hi' >"$T/raw.log" 2>&1 ||
  { cat "$T/raw.log"; exit 1; }
grep -F "[probe:hello.0] attached to sched_process_exec (raw_tp)" "$T/raw.log"
python3 - "$T/hello-raw.jsonl" <<'PY'
import json, sys
execs = [json.loads(l)["filename"] for l in open(sys.argv[1]) if '"hello.exec"' in l]
assert execs.count("/bin/true") == 1 and "/bin/echo" in execs, execs
print("raw_tp hello.exec:", execs)
PY

step "systemd-analyze verify"
# --man=no: the pages are installed under the temporary prefix, not in man's path
systemd-analyze verify --man=no "$P/lib/systemd/system/ntcore.service"
grep -q "^ExecStart=$P/bin/ntcore " "$P/lib/systemd/system/ntcore.service"
echo "install: ok"
