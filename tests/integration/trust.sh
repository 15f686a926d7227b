#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Plugin trust end to end, as root: plugins, the directories above them and
# config files are refused unless owned by root (or the daemon's user) and
# writable by no one else, with the reason; --list-plugins and --help-plugin
# never run the constructor of an untrusted file. The fixture plugin's
# constructor appends to $NT_CTOR_MARK, so "it ran" is a file on disk.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
nt_test_tmp nt-trust
chmod 0755 "$T"
FX=$B/tests/fixture_ctor.so
[ -f "$FX" ] || fail "no $FX (build first)"
export NT_CTOR_MARK=$T/mark
unset NTCORE_PLUGIN_PATH
fails=0
pass() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; fails=$((fails + 1)); }

# plugdir NAME: a fresh root-owned 0755 directory holding a copy of the fixture.
plugdir() {
	mkdir -p "$T/$1"
	chmod 0755 "$T/$1"
	install -m 0755 "$FX" "$T/$1/fixture_ctor.so"
}
# conf NAME DIR: a config that names DIR as a plugin dir and uses the fixture.
conf() {
	printf 'ntcore = { plugin_dirs = [ "%s" ]; };\nplugins = ( { plugin = "fixture_ctor"; } );\n' \
		"$2" >"$T/$1.conf"
	chmod 0644 "$T/$1.conf"
}
# refused WHAT CONF PATTERN: --check exits 2 with PATTERN and no constructor ran.
refused() {
	local rc=0
	rm -f "$NT_CTOR_MARK"
	"$NTCORE" -c "$2" --check >"$T/out" 2>&1 || rc=$?
	if [ $rc != 2 ]; then bad "$1: exit $rc, want 2: $(cat "$T/out")"
	elif ! grep -qE -- "$3" "$T/out"; then bad "$1: no /$3/ in: $(cat "$T/out")"
	elif [ -e "$NT_CTOR_MARK" ]; then bad "$1: the untrusted plugin's constructor ran"
	else pass "$1: refused ($(grep -oE -- "$3" "$T/out" | head -1))"; fi
}

# Positive control: a trusted copy loads, and its constructor leaves the mark.
plugdir ok
conf ok "$T/ok"
rm -f "$NT_CTOR_MARK"
if "$NTCORE" -c "$T/ok.conf" --check >"$T/out" 2>&1 && [ -s "$NT_CTOR_MARK" ]; then
	pass "a root-owned 0755 plugin in a 0755 directory loads (its constructor ran)"
else bad "the trusted plugin: $(cat "$T/out")"; fi

plugdir owner
chown 65534:65534 "$T/owner/fixture_ctor.so"
conf owner "$T/owner"
refused "a plugin owned by nobody" "$T/owner.conf" "refusing a plugin file owned by uid 65534"

plugdir group
chmod 0775 "$T/group/fixture_ctor.so"
conf group "$T/group"
refused "a group-writable plugin" "$T/group.conf" "refusing a plugin file writable by its group \(mode 0775\)"

plugdir open
chmod 0777 "$T/open"
conf open "$T/open"
refused "a plugin in a 0777 directory" "$T/open.conf" "its directory $T/open is writable by others \(mode 0777\)"

mkdir -p "$T/upper"
chown 65534:65534 "$T/upper"
plugdir upper/lib
conf upper "$T/upper/lib"
refused "a plugin under a directory owned by nobody" "$T/upper.conf" "its directory $T/upper is owned by uid 65534"

# The issue's case: a 0666 config names a plugin dir.
conf world "$T/ok"
chmod 0666 "$T/world.conf"
refused "a 0666 config" "$T/world.conf" "world.conf: refusing a config file writable by others \(mode 0666\)"
conf nobodys "$T/ok"
chown 65534:65534 "$T/nobodys.conf"
refused "a config owned by nobody" "$T/nobodys.conf" "refusing a config file owned by uid 65534"

# --list-plugins and --help-plugin over untrusted files: refusals, no constructor.
rm -f "$NT_CTOR_MARK"
NTCORE_PLUGIN_PATH=$T/owner:$T/group:$T/open:$T/upper/lib "$NTCORE" --list-plugins >"$T/list" 2>&1 || true
n=$(grep -c "refusing a plugin file" "$T/list" || true)
if [ "$n" = 4 ] && [ ! -e "$NT_CTOR_MARK" ]; then
	pass "--list-plugins names 4 untrusted files and runs none of them"
else bad "--list-plugins: $n refusals, mark: $(cat "$NT_CTOR_MARK" 2>/dev/null): $(cat "$T/list")"; fi
rc=0
NTCORE_PLUGIN_PATH=$T/open "$NTCORE" --help-plugin fixture_ctor >"$T/help" 2>&1 || rc=$?
if [ $rc = 2 ] && grep -q "writable by others" "$T/help" && [ ! -e "$NT_CTOR_MARK" ]; then
	pass "--help-plugin refuses an untrusted file without opening it"
else bad "--help-plugin: rc=$rc $(cat "$T/help")"; fi

# The daemon's own user may own its plugins: run as nobody.
if command -v setpriv >/dev/null; then
	mkdir -p "$T/own"
	chown 65534:65534 "$T/own"
	install -o 65534 -g 65534 -m 0755 "$FX" "$T/own/fixture_ctor.so"
	conf own "$T/own"
	chown 65534:65534 "$T/own.conf"
	rm -f "$NT_CTOR_MARK"; touch "$NT_CTOR_MARK"; chown 65534 "$NT_CTOR_MARK"
	if setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$NTCORE" -c "$T/own.conf" --check >"$T/out" 2>&1 && [ -s "$NT_CTOR_MARK" ]; then
		pass "ntcore running as nobody trusts nobody's plugin and config"
	else bad "as nobody: $(cat "$T/out")"; fi
else
	bad "setpriv (util-linux) is missing"
fi

echo "trust: $fails failure(s)"
[ $fails = 0 ]
