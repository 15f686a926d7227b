# SPDX-License-Identifier: MIT
# tests/integration/lib.sh: the preamble and checks the probe tests share.
# Source it after `set -euo pipefail`:
#
#   . "$(dirname "$0")/lib.sh"
#   nt_test_init PLUGIN "$@"
#
# fail MSG: "NAME.sh: FAIL: MSG" on stderr, exit 1 (NAME.sh: this script).
# skip MSG: "SKIP NAME.sh: MSG" on stdout, exit 77 (meson's skip code). Only
# for a dependency plain Debian cannot provide (NVIDIA's CUDA runtime);
# scripts/test.sh counts the test as skipped and repeats the line.
#
# nt_test_root BUILD_ROOT: B (the build root, absolute), HERE (this
# folder), NTCORE (the daemon), NTCORE_PLUGIN_PATH; fails unless it runs as
# root, the daemon is built and python3 is there.
# nt_test_init PLUGIN BUILD_ROOT: the same, and B/plugins/PLUGIN/PLUGIN.so
# must be built.
#
# nt_test_tmp PREFIX: T, a fresh /tmp/PREFIX.XXXXXX, removed at exit (kept
# when KEEP is set) after the script's test_cleanup, if it defines one.
#
# expect_pexit READY SECONDS CMD...: a -p target that exits mid-run. CMD
# (a workload that waits for the file $T/gate before it works) runs in the
# background as XPID; `ntcore -c $T/pexit.conf -p XPID -d SECONDS` logs to
# $T/pexit.out; once that shows READY the gate opens. The workload must
# succeed, the daemon must run on to its -d end (at least 1 s after the
# target exited) and exit 0, and log "target pid XPID (COMM) exited with
# status 0" (COMM: the name of CMD's program, as the kernel keeps it).
#
# expect_config_error NAME ARG PATTERN: the script's `conf NAME ARG` writes
# $T/NAME.conf with the instance under test on line 3; the daemon must exit
# 2 with a "$T/NAME.conf:3: ..." message matching PATTERN (grep -E).

NT_TEST=$(basename "$0")

fail() { echo "$NT_TEST: FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP $NT_TEST: $*"; exit 77; }

# need_cuda_toolkit_lib BUILT LIB: skip when the CUDA toolkit's LIB
# (libcudart.so, libcudart_static.a) is not installed; fail when it is but
# BUILT (the program linked against it) was not built.
need_cuda_toolkit_lib() {
	local home=${CUDA_HOME:-/usr/local/cuda}
	[ -e "$home/lib64/$2" ] ||
		skip "needs NVIDIA's $2 (CUDA toolkit at $home, set CUDA_HOME), which Debian does not ship"
	[ -x "$1" ] || fail "$home/lib64/$2 exists but $1 was not built (reconfigure the build)"
}

nt_test_root() { # BUILD_ROOT
	[ -n "${1:-}" ] || fail "usage: $NT_TEST BUILD_ROOT"
	[ -d "$1" ] || fail "no build root $1"
	B=$(cd "$1" && pwd)
	HERE=$(cd "$(dirname "$0")" && pwd)
	NTCORE=$B/core/ntcore
	export NTCORE_PLUGIN_PATH=$B/plugins:$B/sinks
	[ "$(id -u)" = 0 ] || fail "needs root (BPF)"
	[ -x "$NTCORE" ] || fail "no daemon at $NTCORE (build first)"
	command -v python3 >/dev/null || fail "python3 is needed"
}

nt_test_init() { # PLUGIN BUILD_ROOT
	nt_test_root "${2:-}"
	[ -f "$B/plugins/$1/$1.so" ] || fail "$1 plugin not built in $B"
}

nt_test_cleanup() {
	if declare -F test_cleanup >/dev/null; then test_cleanup || true; fi
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}

nt_test_tmp() { # PREFIX
	T=$(mktemp -d "/tmp/$1.XXXXXX")
	trap nt_test_cleanup EXIT
}

expect_config_error() { # NAME ARG PATTERN
	conf "$1" "$2"
	set +e
	timeout 20 "$NTCORE" -c "$T/$1.conf" -d 1 >"$T/$1.out" 2>&1
	local rc=$?
	set -e
	[ "$rc" = 2 ] || { cat "$T/$1.out" >&2; fail "$1: exit $rc, expected 2"; }
	grep -Eq "$T/$1.conf:3: .*$3" "$T/$1.out" ||
		{ cat "$T/$1.out" >&2; fail "$1: no FILE:LINE message matching '$3'"; }
	echo "$NT_TEST: $1: $(grep -E "$T/$1.conf:3" "$T/$1.out" | head -1)"
}

expect_pexit() { # READY SECONDS CMD...
	local ready=$1 secs=$2 comm npid rc start
	shift 2
	comm=$(basename "$1" | cut -c1-15)
	"$@" &
	XPID=$!
	timeout 90 "$NTCORE" -c "$T/pexit.conf" -p "$XPID" -d "$secs" >"$T/pexit.out" 2>&1 &
	npid=$!
	for _ in $(seq 100); do
		grep -q "$ready" "$T/pexit.out" && break
		sleep 0.1
	done
	grep -q "$ready" "$T/pexit.out" ||
		{ cat "$T/pexit.out" >&2; fail "pexit: never attached (no '$ready')"; }
	touch "$T/gate"
	wait "$XPID" || fail "pexit: the workload failed"
	start=$(date +%s)
	set +e
	wait "$npid"
	rc=$?
	set -e
	[ "$rc" = 0 ] || { cat "$T/pexit.out" >&2; fail "pexit: ntcore exited with $rc after its target exited"; }
	[ $(( $(date +%s) - start )) -ge 1 ] ||
		fail "pexit: ntcore stopped when the target exited instead of running to -d"
	grep -qF "target pid $XPID ($comm) exited with status 0" "$T/pexit.out" ||
		{ cat "$T/pexit.out" >&2; fail "pexit: no message about the exited target"; }
}
