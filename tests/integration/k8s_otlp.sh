#!/bin/bash
# OTLP with identity (issue 21): a process in cgroups named as the
# kubelet's systemd driver and CRI-O name them (a kubelet pod directory
# beside), traced with --cgroup, exported by the gRPC sink with
# identity = true to a test collector:
#   - its log records carry container.id, container.runtime, k8s.pod.uid,
#     k8s.pod.name, k8s.namespace.name exactly; its proc.exit record
#     carries process.exit.code (the exit status it chose, 7);
#   - its metric points carry k8s.pod.uid, k8s.pod.name,
#     k8s.namespace.name, container.id and process.executable.name
#     (identity_labels = ["comm", "container", "pod"]), and no process.pid.
# Usage: k8s_otlp.sh BUILD_ROOT
set -euo pipefail
B=$(realpath "${1:?usage: k8s_otlp.sh BUILD_ROOT}")
S=$(realpath "$(dirname "$0")/../..")
T=$(mktemp -d /tmp/ntcore-k8s-otlp.XXXXXX)
RPID_rx=
MNT=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
K8S=$MNT/nt-k8s-otlp-$$
UID_=7c1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0
PODUID=7c1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0
CID=fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210
POD=$K8S/kubepods.slice/kubepods-pod$UID_.slice
CTR=$POD/crio-$CID.scope
cleanup() {
	[ -n "$RPID_rx" ] && kill "$RPID_rx" 2>/dev/null || true
	wait 2>/dev/null || true
	for d in "$CTR" "$POD" "$K8S/kubepods.slice" "$K8S"; do
		[ -d "$d" ] || continue
		while read -r p; do echo "$p" >"$MNT/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
		rmdir "$d" 2>/dev/null || true
	done
	if [ -n "${KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
. "$S/tests/integration/grpc/lib.sh"
need_tools
[ "$(id -u)" -eq 0 ] || fail "must run as root (BPF, cgroups)"
[ -n "$MNT" ] || fail "cgroup2 is not mounted"
export NTCORE_PLUGIN_PATH="$B/plugins:$B/sinks"

mkdir -p "$CTR" "$T/kubelet/pods/$PODUID/volumes/kubernetes.io~projected/kube-api-access-9qz7t"
printf '# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.244.1.9\tresnet-train-7f9c\n' >"$T/kubelet/pods/$PODUID/etc-hosts"
printf 'vision' >"$T/kubelet/pods/$PODUID/volumes/kubernetes.io~projected/kube-api-access-9qz7t/namespace"

start_receiver rx
cat >"$T/k8s.conf" <<EOF
ntcore = { identity_labels = ["comm", "container", "pod"]; kubelet_dir = "$T/kubelet"; };
plugins = (
  { plugin = "sched"; required = true; interval_ms = 200; },
  { plugin = "grpc"; endpoint = "127.0.0.1:$PORT_rx"; events = [ "sched.*", "proc.exit" ];
    identity = true; batch_size = 64; batch_timeout_ms = 100; metrics_interval_ms = 150; }
);
EOF
"$NTCORE" -c "$T/k8s.conf" --cgroup "$K8S/kubepods.slice" -d 4 >"$T/ntcore.log" 2>&1 &
NPID=$!
for _ in $(seq 100); do grep -qs attached "$T/ntcore.log" && break; sleep 0.1; done
# moves itself into the container's cgroup, burns 1 s, exits 7
$PY -c "
import os, time
open('$CTR/cgroup.procs', 'w').write(str(os.getpid()))
open('$T/w.pid', 'w').write(str(os.getpid()))
end = time.time() + 1.0
while time.time() < end:
    pass
os._exit(7)" || true
wait "$NPID" || { cat "$T/ntcore.log" >&2; fail "ntcore failed"; }
stop_receiver rx
RPID_rx=
$PY - "$T/rx.jsonl" "$(cat "$T/w.pid")" "$CID" "$PODUID" <<'EOF' || { cat "$T/ntcore.log" >&2; fail "OTLP identity"; }
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
pid, cid, uid = int(sys.argv[2]), sys.argv[3], sys.argv[4]
val = lambda a, k: a.get(k, [None, None])[1]
logs = [r for r in recs if r["kind"] == "log" and val(r["attrs"], "process.pid") == pid]
assert logs, "no log records of pid %d" % pid
want = {"container.id": cid, "container.runtime": "cri-o", "k8s.pod.uid": uid,
        "k8s.pod.name": "resnet-train-7f9c", "k8s.namespace.name": "vision", "ntcore.k8s.qos": "guaranteed"}
for r in logs:
    got = {k: val(r["attrs"], k) for k in want}
    assert got == want, "%s: %s" % (r["event_name"], got)
ex = [r for r in logs if r["event_name"] == "proc.exit"]
assert ex and val(ex[0]["attrs"], "process.exit.code") == 7, "proc.exit: %s" % (ex[0]["attrs"] if ex else "none")
pts = []
for m in recs:
    if m["kind"] == "metric" and m["name"] == "ntcore_sched_oncpu_seconds_total":
        pts += [{k: v[1] for k, v in p["attrs"].items()} for p in m["points"]]
mine = [p for p in pts if p.get("k8s.pod.uid") == uid]
assert mine, "no on-CPU point with k8s.pod.uid=%s: %s" % (uid, pts[:3])
p = mine[-1]
assert p.get("container.id") == cid and p.get("k8s.pod.name") == "resnet-train-7f9c" \
    and p.get("k8s.namespace.name") == "vision" and "process.pid" not in p, p
print("k8s_otlp: %d log records of pid %d with %s; proc.exit process.exit.code=7; metric point %s"
      % (len(logs), pid, sorted(want), p))
EOF
echo "k8s_otlp: OK"
