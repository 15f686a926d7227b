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
echo "$(basename "$CG")" >"$T/cgname"

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
  { plugin = "file"; path = "$1"; metrics = false; identity = true; }
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
# identity (file sink, identity = true): the cgroup path as /proc shows it
cg = "/" + open(t + "/cgname").read().strip()
want = {a: cg, b: cg, c: cg + "/inner"}
for e in th:
    assert e.get("ntcore.cgroup") == want[e["pid"]], "pid %d: cgroup %r, expected %r" % (e["pid"], e.get("ntcore.cgroup"), want[e["pid"]])
    assert "container.id" not in e, "a container id where there is none"
print("%s: every event carries its process's cgroup (%s, %s/inner)" % (name, cg, cg))
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

# A process in cgroups named as the kubelet (systemd driver) and containerd
# name them, with a kubelet pod directory: its events carry the container
# id, runtime, pod UID, QoS, pod name and namespace, parsed exactly.
UID_=0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0
PODUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0
CID=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
K8S=$MNT/nt-k8s-$$
POD=$K8S/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$UID_.slice
CTR=$POD/cri-containerd-$CID.scope
mkdir -p "$CTR"
mkdir -p "$T/kubelet/pods/$PODUID/volumes/kubernetes.io~projected/kube-api-access-4xk2p"
printf '# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.244.3.17\ttrainer-0\n' >"$T/kubelet/pods/$PODUID/etc-hosts"
printf 'ml-team' >"$T/kubelet/pods/$PODUID/volumes/kubernetes.io~projected/kube-api-access-4xk2p/namespace"
test_cleanup_k8s() {
	for d in "$CTR" "$POD" "$K8S/kubepods.slice/kubepods-burstable.slice" "$K8S/kubepods.slice" "$K8S"; do
		[ -d "$d" ] || continue
		while read -r p; do echo "$p" >"$MNT/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
		rmdir "$d" 2>/dev/null || true
	done
}
conf "$T/k8s.jsonl" "kubelet_dir = \"$T/kubelet\";"
$PY "$T/burn.py" "$T/k.pid" 4 "" "$CTR/cgroup.procs" &
PIDS+=($!)
wait_file "$T/k.pid"
timeout 60 "$NTCORE" -c "$T/cg.conf" --cgroup "$K8S/kubepods.slice" -d 2 >"$T/k8s.log" 2>&1 ||
	{ cat "$T/k8s.log" >&2; test_cleanup_k8s; fail "k8s: ntcore failed"; }
$PY - "$T/k8s.jsonl" "$(cat "$T/k.pid")" "$CID" "$PODUID" <<'EOF' || { test_cleanup_k8s; fail "k8s identity"; }
import json, sys
out, pid, cid, uid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ev = [json.loads(l) for l in open(out)]
mine = [e for e in ev if e["type"] == "sched.thread" and e["pid"] == pid]
assert mine, "no events of the containerized process %d" % pid
e = mine[0]
got = {k: e.get(k) for k in ("container.id", "container.runtime", "k8s.pod.uid", "ntcore.k8s.qos", "k8s.pod.name", "k8s.namespace.name")}
print("k8s: pid %d: %s; cgroup %s" % (pid, got, e.get("ntcore.cgroup")))
assert got == {"container.id": cid, "container.runtime": "containerd", "k8s.pod.uid": uid,
               "ntcore.k8s.qos": "burstable", "k8s.pod.name": "trainer-0", "k8s.namespace.name": "ml-team"}, got
assert e["ntcore.cgroup"].endswith("/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope" % (uid.replace("-", "_"), cid))
EOF
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
PIDS=()
test_cleanup_k8s

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
