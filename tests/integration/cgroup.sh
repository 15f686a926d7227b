#!/bin/bash
# --cgroup (issue 21), real cgroups: the test makes a cgroup v2 directory
# with a child cgroup below it and runs `ntcore --cgroup DIR` with the
# sched probe and the file sink. Followed, and nothing else:
#   A  a burner moved into DIR before ntcore starts (the start-up scan);
#   B  a child A forks after ntcore attached (fork following);
#   C  a process that moves itself into DIR/inner after ntcore attached,
#      then burns (the cgroup_attach_task program: a move, not a fork);
#   D  a burner outside DIR the whole time: must never appear.
# Every pid in sched.thread events must be one of A, B, C. The burners
# share 2 CPUs, so a burner's on-CPU time is checked only to be there.
# Then the config key (ntcore.cgroup = "...") instead of the option, and
# the refusals: a missing directory, a cgroup v1 directory (exit 2).
# Usage: cgroup.sh BUILD_ROOT
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_init sched "$@"

PIDS=()
test_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	# move anything left back to the root, then remove the cgroups
	for d in "$CG/inner" "$CG"; do
		[ -d "$d" ] || continue
		while read -r p; do echo "$p" >"$MNT/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
		rmdir "$d" 2>/dev/null || true
	done
}
nt_test_tmp ntcore-cgroup
# Debian's interpreter, not a shim (pyenv's forks helpers in the cgroup)
PY=/usr/bin/python3

MNT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
[ -n "$MNT" ] || fail "cgroup2 is not mounted on this machine"
CG=$MNT/nt-cgtest-$$
mkdir "$CG" "$CG/inner"
echo "$NT_TEST: cgroup v2 at $MNT, test cgroup $CG"

# burn.py PIDFILE SECONDS [FORKGATE [MOVETO]]: writes its pid, burns CPU; with
# FORKGATE, forks a child (once that file exists) that writes its own pid
# to PIDFILE.child and burns 1 s; with MOVETO (a cgroup.procs file), it
# first moves itself there.
cat >"$T/burn.py" <<'EOF'
import os, sys, time
if len(sys.argv) > 4:  # move itself, no exec after: the move is what counts
    open(sys.argv[4], "w").write("%d\n" % os.getpid())
open(sys.argv[1], "w").write("%d\n" % os.getpid())
end = time.time() + float(sys.argv[2])
gate = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
while time.time() < end:
    if gate and os.path.exists(gate):
        gate = None
        if os.fork() == 0:
            open(sys.argv[1] + ".child", "w").write("%d\n" % os.getpid())
            t = time.time() + 1.0
            while time.time() < t:
                pass
            os._exit(0)
    for _ in range(20000):
        pass
EOF

wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "no $1"; }

conf() { # OUT [extra ntcore keys]
	cat >"$T/cg.conf" <<EOF
ntcore = { log_level = "info"; ${2:-} };
plugins = (
  { plugin = "sched"; required = true; interval_ms = 200; },
  { plugin = "file"; path = "$1"; metrics = false; }
);
EOF
}

run_case() { # NAME [ARGS...]: A, B, C, D around one run
	local name=$1 npid
	shift
	rm -f "$T"/*.pid "$T"/*.child "$T/gate"
	sh -c "echo \$\$ > '$CG/cgroup.procs'; exec $PY '$T/burn.py' '$T/a.pid' 8 '$T/gate'" &
	PIDS+=($!)
	$PY "$T/burn.py" "$T/d.pid" 8 &
	PIDS+=($!)
	wait_file "$T/a.pid"
	wait_file "$T/d.pid"
	timeout 60 "$NTCORE" -c "$T/cg.conf" "$@" -d 5 >"$T/$name.log" 2>&1 &
	npid=$!
	for _ in $(seq 150); do
		grep -qs "attached" "$T/$name.log" && break
		sleep 0.1
	done
	grep -q "attached" "$T/$name.log" || { cat "$T/$name.log" >&2; fail "$name: sched never attached"; }
	touch "$T/gate"
	$PY "$T/burn.py" "$T/c.pid" 1.5 "" "$CG/inner/cgroup.procs" &
	PIDS+=($!)
	wait "$npid" || { cat "$T/$name.log" >&2; fail "$name: ntcore failed"; }
	wait_file "$T/a.pid.child"
	python3 - "$T/$name.jsonl" "$T" "$name" <<'EOF' || { cat "$T/$name.log" >&2; fail "$name"; }
import json, sys
out, t, name = sys.argv[1], sys.argv[2], sys.argv[3]
pid = lambda f: int(open(t + "/" + f).read())
a, b, c, d = pid("a.pid"), pid("a.pid.child"), pid("c.pid"), pid("d.pid")
ev = [json.loads(l) for l in open(out)]
th = [e for e in ev if e["type"] == "sched.thread"]
on = {p: sum(e["oncpu_ns"] for e in th if e["pid"] == p) / 1e9 for p in (a, b, c, d)}
seen = sorted({e["pid"] for e in th})
print("%s: A(before)=%d %.2fs  B(forked later)=%d %.2fs  C(moved in later)=%d %.2fs  D(outside)=%d %.2fs; pids seen %s"
      % (name, a, on[a], b, on[b], c, on[c], d, on[d], seen))
assert on[a] > 0.05, "A (in the cgroup before the start) not followed"
assert on[b] > 0.01, "B (forked by A after the start) not followed"
assert on[c] > 0.01, "C (moved into the cgroup after the start) not followed"
assert d not in seen, "D (outside the cgroup) was traced"
assert set(seen) <= {a, b, c}, "processes outside the cgroup traced: %s" % (set(seen) - {a, b, c})
EOF
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	PIDS=()
}

conf "$T/opt.jsonl"
run_case opt --cgroup "$CG"
grep -q "cgroup $CG: 1 process now" "$T/opt.log" || { cat "$T/opt.log" >&2; fail "opt: start-up scan line"; }

# the config key, relative to the cgroup2 mount
conf "$T/key.jsonl" "cgroup = \"$(basename "$CG")\";"
run_case key

# refusals
conf "$T/x.jsonl"
rc=0; "$NTCORE" -c "$T/cg.conf" --cgroup /nonexistent-cg -d 1 >"$T/bad.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "no such cgroup directory" "$T/bad.log" || { cat "$T/bad.log" >&2; fail "missing cgroup: exit $rc"; }
V1=$(awk '$3 == "cgroup" { print $2; exit }' /proc/self/mounts)
if [ -n "$V1" ]; then
	rc=0; "$NTCORE" -c "$T/cg.conf" --cgroup "$V1" -d 1 >"$T/v1.log" 2>&1 || rc=$?
	[ "$rc" = 2 ] && grep -q "not a cgroup v2 directory" "$T/v1.log" || { cat "$T/v1.log" >&2; fail "v1 cgroup: exit $rc"; }
fi
echo "$NT_TEST: OK"
