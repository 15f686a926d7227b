#!/usr/bin/env bash
# The daemon's command line end to end: exit codes and messages for bad
# input, --check, --list-plugins, plugin isolation, the wrapped job's exit
# status, one clear line without privileges, SIGPIPE on stdout, SIGTERM
# leaving a complete JSONL file, SIGHUP reload, the default config's
# summary.
set -euo pipefail
B=${1:?build root}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
NT=$B/core/ntcore
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks:$B/tests
T=$(mktemp -d /tmp/nt-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
pass() { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN -- ARGS: run ntcore, check exit status and stderr.
expect() {
  local want=$1 pattern=$2; shift 3
  local got=0
  "$NT" "$@" >"$T/out" 2>"$T/err" </dev/null || got=$?
  if [ "$got" != "$want" ]; then
    fail "ntcore $* exited $got, want $want: $(head -3 "$T/err")"
  elif [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$T/err" "$T/out"; then
    fail "ntcore $*: no /$pattern/ in: $(head -3 "$T/err")"
  else
    pass "ntcore $* -> $want"
  fi
}

cat >"$T/unknown.conf" <<'C'
plugins = (
  { plugin = "file";
    path = "/tmp/x.jsonl";
    max_sise_mb = 3; }
);
C
expect 2 "unknown.conf:4: \[file.0\] unknown key 'max_sise_mb'" -- -c "$T/unknown.conf" --check

cat >"$T/type.conf" <<'C'
plugins = (
  { plugin = "file"; interval_ms = "often"; }
);
C
expect 2 "type.conf:2: \[file.0\] interval_ms: expected an integer" -- -c "$T/type.conf" --check

cat >"$T/missing.conf" <<'C'
plugins = ( { plugin = "nosuchplugin"; } );
C
expect 2 "missing.conf:1: plugin 'nosuchplugin' not found \(searched: .*$B/plugins" -- -c "$T/missing.conf" --check

cat >"$T/abi.conf" <<'C'
plugins = ( { plugin = "fixture_new_major"; } );
C
# This build's ABI (the minor grows: 1.2 added host functions).
abi=$("$NT" --version | sed -n 's/.*plugin ABI \([0-9]*\)\.\([0-9]*\)).*/\1\\.\2/p')
expect 2 "plugin ABI 2\.0 is not supported by this ntcore \(ABI $abi\)" -- -c "$T/abi.conf" --check

# A plugin built against the previous minor's descriptor layout runs.
cat >"$T/old.conf" <<'C'
plugins = ( { plugin = "fixture_old_minor"; }, { plugin = "stdout"; } );
C
expect 0 "fixture_old_minor\.0 +probe +attached" -- -c "$T/old.conf" -d 1
"$NT" --list-plugins 2>&1 | grep -qE "^  fixture_old_minor +probe +1\.0 " &&
  pass "--list-plugins shows ABI 1.0 for the old plugin" || fail "old plugin not listed as 1.0"

mkdir -p "$T/perm"
cp "$B/sinks/file/file.so" "$T/perm/file.so"
chmod 0666 "$T/perm/file.so"
cat >"$T/perm.conf" <<C
ntcore = { plugin_dirs = [ "$T/perm" ]; };
plugins = ( { plugin = "file"; } );
C
NTCORE_PLUGIN_PATH= expect 2 "refusing a plugin file writable by others" -- -c "$T/perm.conf" --check

printf 'plugins = ( { plugin = "file" ' >"$T/syntax.conf"
expect 2 "syntax.conf:1: syntax error" -- -c "$T/syntax.conf"
expect 2 "cannot read the config file" -- -c "$T/nope.conf"
expect 2 "-p 4194000: no such process" -- -c "$SRC/conf.d/default.conf" -p 4194000 -d 1
expect 2 "expected a positive number" -- -c "$SRC/conf.d/default.conf" -d soon
expect 2 "not a process id" -- -p abc
expect 0 "OK \(3 plugin instances\)" -- -c "$SRC/conf.d/default.conf" --check

"$NT" --list-plugins >"$T/list" 2>&1
for p in sched file stdout; do
  if grep -qE "^  $p +(probe|sink) +$abi " "$T/list"; then pass "--list-plugins shows $p"
  else fail "--list-plugins lacks $p: $(cat "$T/list")"; fi
done
"$NT" --help-plugin file >"$T/help" 2>&1 && grep -q "max_size_mb" "$T/help" &&
  pass "--help-plugin file lists its keys" || fail "--help-plugin file: $(cat "$T/help")"
# integer bounds print as integers, never as 1.04858e+06
"$NT" --help-plugin file >"$T/help" 2>&1 && grep -qE "max_size_mb .*\[0\.\.1048576\]" "$T/help" &&
  ! grep -qE "[0-9]e[+-][0-9]" "$T/help" &&
  pass "--help-plugin prints integer bounds as integers" || fail "--help-plugin bounds: $(grep max_size_mb "$T/help")"

# A plugin that fails to attach does not take the others down...
cat >"$T/isolate.conf" <<C
plugins = (
  { plugin = "file"; name = "broken"; path = "/nonexistent/dir/x.jsonl"; },
  { plugin = "file"; name = "good"; path = "$T/good.jsonl"; }
);
C
expect 0 "\[sink:broken\] attach failed: No such file or directory; the other plugins go on" \
  -- -c "$T/isolate.conf" -- true
[ -s "$T/good.jsonl" ] && grep -q '"type":"proc.exit"' "$T/good.jsonl" &&
  pass "the other sink still got proc.exit" || fail "good.jsonl lacks proc.exit"
# ...unless it is required.
sed -i 's/name = "broken";/name = "broken"; required = true;/' "$T/isolate.conf"
expect 1 "attach failed" -- -c "$T/isolate.conf" -- true

# The child runs only once everything is attached, and its exit ends the run.
cat >"$T/child.conf" <<C
plugins = ( { plugin = "sched"; }, { plugin = "file"; path = "$T/child.jsonl"; metrics = true; } );
C
expect 7 "target pid [0-9]+ exited with status 7" -- -c "$T/child.conf" -- sh -c 'exit 7'
python3 - "$T/child.jsonl" <<'PY' && pass "proc.exec of the child, proc.exit with status 7" || fail "proc.exit status"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ex = [e for e in ev if e["type"] == "proc.exit"]
assert len(ex) == 1 and ex[0]["exit_code"] == 7 and ex[0]["signal"] == 0, ex
execs = [e for e in ev if e["type"] == "proc.exec"]
assert len(execs) == 1 and execs[0]["filename"].endswith("sh"), execs
assert execs[0]["pid"] == ex[0]["pid"], (execs, ex)
PY

# The wrapped job's contract, as batch systems need it: ntcore exits with
# the job's status, 128 + N when signal N killed it, 127 when the command
# is not found and 126 when it cannot be executed (before any probe loads).
expect 0 "" -- -c "$T/child.conf" -- true
expect 137 "target pid [0-9]+ killed by signal 9" -- -c "$T/child.conf" -- sh -c 'kill -KILL $$'
expect 127 "cannot run 'no-such-command-x': command not found" -- -c "$T/child.conf" -- no-such-command-x
printf '#!/bin/sh\nexit 0\n' >"$T/noexec.sh"
chmod 0644 "$T/noexec.sh"
expect 126 "cannot run '$T/noexec.sh': Permission denied" -- -c "$T/child.conf" -- "$T/noexec.sh"
expect 126 "cannot run '$T': is a directory" -- -c "$T/child.conf" -- "$T"

# Without the privileges to trace: exit 1 and ONE line naming what is
# missing (no libbpf text, no per-plugin EPERM). As nobody, then as nobody
# holding CAP_BPF only. The working directory is one nobody cannot write:
# the file sink fails too, and is not worth a line either.
# The daemon and default.conf's plugins are copied where nobody can read
# them: a build tree may not be (install.sh builds in a 0700 directory).
chmod 0711 "$T"
mkdir -p "$T/pub"
cp "$NT" "$T/pub/ntcore"
cp "$B/plugins/sched/sched.so" "$B/sinks/stdout/stdout.so" "$B/sinks/file/file.so" "$T/pub/"
chmod 0755 "$T/pub"
as_nobody() { # CAPS ARGS...
  local caps=$1; shift
  (cd "$T" && NTCORE_PLUGIN_PATH=$T/pub setpriv --reuid=65534 --regid=65534 --clear-groups \
     ${caps:+--inh-caps=$caps --ambient-caps=$caps} "$T/pub/ntcore" "$@" >"$T/out" 2>"$T/err" </dev/null)
}
for caps in "" +bpf; do
  rc=0; as_nobody "$caps" -c "$SRC/conf.d/default.conf" -d 1 || rc=$?
  lacks="CAP_BPF and CAP_PERFMON"; [ "$caps" = +bpf ] && lacks="CAP_PERFMON"
  if [ $rc = 1 ] && [ "$(wc -l <"$T/err")" = 1 ] &&
     grep -qE "^ntcore: error: no probe could attach: tracing needs root, or the capabilities CAP_BPF and CAP_PERFMON \(this process is not root and lacks $lacks\)$" "$T/err"; then
    pass "unprivileged${caps:+ ($caps)}: exit 1, one line: $(cat "$T/err")"
  else fail "unprivileged${caps:+ ($caps)}: rc=$rc, stderr: $(cat "$T/err")"; fi
done
rc=0; as_nobody "" -c "$SRC/conf.d/default.conf" -- true || rc=$?
if [ $rc = 1 ] && [ "$(wc -l <"$T/err")" = 1 ] &&
   grep -q "cannot trace the command: tracing needs root, or the capabilities CAP_BPF and CAP_PERFMON" "$T/err"; then
  pass "unprivileged -- CMD: exit 1, one line"
else fail "unprivileged -- CMD: rc=$rc, stderr: $(cat "$T/err")"; fi

# SIGPIPE: stdout read by `head -c 1`, which leaves at once. The daemon
# runs on to -d, exits 0, says once that stdout closed, and the file sink
# loses nothing (its file is complete, metrics included).
cat >"$T/pipe.conf" <<C
plugins = ( { plugin = "sched"; },
            { plugin = "stdout"; interval_ms = 200; mode = "append"; },
            { plugin = "file"; path = "$T/pipe.jsonl"; metrics = true; } );
C
set +o pipefail
"$NT" -c "$T/pipe.conf" -d 2 2>"$T/pipe.err" | head -c 1 >/dev/null
rc=${PIPESTATUS[0]}
set -o pipefail
if [ "$rc" = 0 ] && grep -q "stdout is closed (Broken pipe): the summary stops here; the other sinks go on" "$T/pipe.err" &&
   grep -q "summary after 2" "$T/pipe.err" && python3 - "$T/pipe.jsonl" <<'PY'
import json, sys
data = open(sys.argv[1]).read()
assert data.endswith("\n"), "torn last line"
ev = [json.loads(l) for l in data.splitlines()]
assert any(e["type"] == "metric" for e in ev), "no metrics (the final flush was lost)"
assert any(e["type"] == "sched.report" for e in ev), "no sched.report"
PY
then pass "SIGPIPE on stdout: exit 0, file sink complete"
else fail "SIGPIPE: rc=$rc $(tail -5 "$T/pipe.err")"; fi

# SIGTERM mid-run with a job: the signal is passed on to the job, tracing
# goes on while it exits, ntcore exits with its status (128 + 15), and
# every line of the file is whole and valid JSON, the job's exit included.
cat >"$T/term.conf" <<C
plugins = ( { plugin = "sched"; interval_ms = 200; },
            { plugin = "file"; path = "$T/term.jsonl"; metrics = true; interval_ms = 60000; } );
C
# (spelled so that an older test's `pkill -f "while :; do :; done"`, run
# by another checkout on a shared machine, does not end it early)
"$NT" -c "$T/term.conf" -- sh -c 'while true; do :; done' >"$T/term.out" 2>&1 &
pid=$!
sleep 2
# The loop is ntcore's child (-- CMD); ntcore passes SIGTERM on to it.
# Should it outlive ntcore all the same, it is stopped by its own pid.
loop=$(pgrep -P $pid || true)
kill -TERM $pid || true # a failure shows as the wrong status below
rc=0; wait $pid || rc=$?
[ -z "$loop" ] || kill $loop 2>/dev/null || true
if [ $rc = 143 ] && python3 - "$T/term.jsonl" <<'PY'
import json, sys
data = open(sys.argv[1]).read()
assert data.endswith("\n"), "torn last line"
lines = data.splitlines()
ev = [json.loads(l) for l in lines]
assert any(e["type"] == "metric" for e in ev)
assert any(e["type"].startswith("sched.") for e in ev), "no sched events"
ex = [e for e in ev if e["type"] == "proc.exit"]
assert len(ex) == 1 and ex[0]["signal"] == 15 and ex[0]["exit_code"] == 143, ex
print(len(lines), "lines")
PY
then pass "SIGTERM: passed on to the job, exit 143 and a complete JSONL file"
else fail "SIGTERM: rc=$rc, $(tail -3 "$T/term.out")"; fi

# SIGHUP: the new config takes effect without a restart.
cat >"$T/hup.conf" <<C
plugins = ( { plugin = "file"; path = "$T/before.jsonl"; interval_ms = 1000; } );
C
"$NT" -c "$T/hup.conf" -d 6 -- sleep 5 >"$T/hup.out" 2>&1 &
pid=$!
sleep 1.5
sed -i "s|before.jsonl|after.jsonl|" "$T/hup.conf"
kill -HUP $pid
rc=0; wait $pid || rc=$?
if [ $rc = 0 ] && [ -e "$T/after.jsonl" ] && grep -q '"type":"proc.exit"' "$T/after.jsonl"; then
  pass "SIGHUP reload switched the file sink"
else fail "SIGHUP: rc=$rc $(cat "$T/hup.out")"; fi

# The default config: a readable summary, exit 0.
rc=0
(cd "$T" && "$NT" -c "$SRC/conf.d/default.conf" -d 3 >"$T/default.out" 2>&1) || rc=$?
if [ $rc = 0 ] && grep -q "sched.0 .*attached" "$T/default.out" &&
   grep -q "summary after" "$T/default.out" && grep -q "sched.thread" "$T/default.out"; then
  pass "default.conf -d 3: summary, exit 0"
else fail "default.conf -d 3: rc=$rc $(tail -20 "$T/default.out")"; fi

echo "core_cli: $fails failure(s)"
[ $fails = 0 ]
