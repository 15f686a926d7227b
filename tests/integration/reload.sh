#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SIGHUP reload keeps the running config on any error in the new one (an
# unknown key, a missing plugin, a value only the plugin's init refuses, a
# syntax error, an @include of a directory, a config writable by others),
# and the daemon lives on; then a valid config takes over. At start-up the
# @include of a directory is FILE:LINE and exit 2, never libconfig's "input
# in flex scanner failed".
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
nt_test_tmp nt-reload
export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks

# Start-up: an @include of a directory.
mkdir "$T/adir"
printf 'plugins = ( { plugin = "sched"; } );\n@include "%s"\n' "$T/adir" >"$T/dir.conf"
rc=0; "$NTCORE" -c "$T/dir.conf" --check >"$T/dir.out" 2>&1 || rc=$?
[ $rc = 2 ] || fail "@include of a directory at start-up exited $rc, want 2: $(cat "$T/dir.out")"
grep -q "^$T/dir.conf:2: @include \"$T/adir\": .*is a directory" "$T/dir.out" ||
	fail "no FILE:LINE for the directory include: $(cat "$T/dir.out")"
grep -q "flex" "$T/dir.out" && fail "libconfig's scanner spoke: $(cat "$T/dir.out")"

good() { # FILE: the running config, writing FILE
	printf 'plugins = (\n  { plugin = "sched"; },\n  { plugin = "file"; path = "%s"; }\n);\n' "$1"
}
good "$T/before.jsonl" >"$T/hup.conf"
"$NTCORE" -c "$T/hup.conf" -d 60 >"$T/run.out" 2>&1 &
pid=$!
test_cleanup() { kill -KILL "$pid" 2>/dev/null || true; }
for _ in $(seq 100); do [ -s "$T/before.jsonl" ] && break; sleep 0.1; done
[ -s "$T/before.jsonl" ] || fail "the file sink never wrote: $(cat "$T/run.out")"

refusals=0
# hup_refused NAME WHAT PATTERN: install $T/NAME.conf (a config with WHAT)
# as the config, SIGHUP, wait for the refusal; the daemon must still run and
# the message must match PATTERN.
hup_refused() {
	local what=$2
	cp -p "$T/$1.conf" "$T/hup.conf"
	shift
	refusals=$((refusals + 1))
	kill -HUP "$pid"
	for _ in $(seq 100); do
		[ "$(grep -c 'reload refused' "$T/run.out")" -ge $refusals ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null || fail "$what: the daemon died on SIGHUP: $(tail -5 "$T/run.out")"
	[ "$(grep -c 'reload refused' "$T/run.out")" -ge $refusals ] ||
		fail "$what: no refusal: $(tail -5 "$T/run.out")"
	grep -qE -- "$2" "$T/run.out" || fail "$what: no /$2/ in: $(tail -5 "$T/run.out")"
	[ -e "$T/after.jsonl" ] && fail "$what: the refused config started its file sink"
	echo "ok   - SIGHUP to a config with $what: refused, the daemon runs on"
}

printf 'plugins = (\n  { plugin = "sched"; },\n  { plugin = "file"; path = "%s";\n    bogus = 1; }\n);\n' \
	"$T/after.jsonl" >"$T/unknown.conf"
hup_refused unknown "an unknown key" "hup.conf:4: \[file.0\] unknown key 'bogus'"

printf 'plugins = (\n  { plugin = "file"; path = "%s"; },\n  { plugin = "nosuch"; }\n);\n' \
	"$T/after.jsonl" >"$T/missing.conf"
hup_refused missing "a missing plugin" "hup.conf:3: plugin 'nosuch' not found"

# Valid for the schema (4..1048576); the sched probe's init refuses it.
printf 'plugins = (\n  { plugin = "file"; path = "%s"; },\n  { plugin = "sched"; ringbuf_kb = 100; }\n);\n' \
	"$T/after.jsonl" >"$T/init.conf"
hup_refused init "a value only init refuses" "hup.conf:3: \[sched.0\] ringbuf_kb: 100 is not a power of two"

printf 'plugins = (\n  { plugin = "file"; path = "%s" }\n' "$T/after.jsonl" >"$T/syntax.conf"
hup_refused syntax "a syntax error" "hup.conf:[0-9]+: syntax error"

{ good "$T/after.jsonl"; printf '@include "%s"\n' "$T/adir"; } >"$T/incdir.conf"
hup_refused incdir "an @include of a directory" "hup.conf:5: @include \"$T/adir\": .*is a directory"

good "$T/after.jsonl" >"$T/open.conf"
chmod 0666 "$T/open.conf"
hup_refused open "a config writable by others" "refusing a config file writable by others \(mode 0666\)"

# The old config ran all along: sched events reach before.jsonl after the
# last refusal.
refused_at=$(date +%s%N)
sleep 2.5
good "$T/after.jsonl" >"$T/hup.conf"
chmod 0644 "$T/hup.conf"
kill -HUP "$pid"
for _ in $(seq 100); do [ -s "$T/after.jsonl" ] && break; sleep 0.1; done
[ -s "$T/after.jsonl" ] || fail "the valid reload did not start the new file sink: $(tail -5 "$T/run.out")"
echo "ok   - a valid config then takes over"
sleep 1.5
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
[ $rc = 0 ] || fail "the daemon exited $rc: $(tail -20 "$T/run.out")"
python3 - "$T/before.jsonl" "$T/after.jsonl" "$refused_at" <<'PY' || fail "events: see above"
import json, sys
before = [json.loads(l) for l in open(sys.argv[1])]
after = [json.loads(l) for l in open(sys.argv[2])]
t = int(sys.argv[3])
late = [e for e in before if e["type"] == "sched.thread" and e["ts"] > t]
assert late, "no sched.thread in before.jsonl after the refused reloads"
assert any(e["type"] == "sched.thread" for e in after), "no sched.thread after the reload"
print(f"ok   - the running config kept delivering: {len(late)} sched.thread events "
      f"after the refusals; {len(after)} events after the valid reload")
PY
grep -q "flex" "$T/run.out" && fail "libconfig's scanner spoke: $(grep flex "$T/run.out")"
echo "reload: all passed"
