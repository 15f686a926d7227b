#!/bin/bash
# Run the sched probe inside the ntcore image against the host (issue 21):
# a CPU burner on the host (named nt-host-burner), ntcore in a container
# with the host's PID namespace, a read-only root, every capability
# dropped but BPF, PERFMON, SYS_PTRACE and DAC_READ_SEARCH, and tracefs
# mounted read-only. The container's events (file sink, identity on) must
# hold the burner's host pid and name with on-CPU time, and its metric
# lines no pid label (identity_labels without pid).
#
# How it runs on this kind of VM (hybrid cgroups: v1 controllers, cgroup2
# at /sys/fs/cgroup/unified with a controller enabled, no systemd as PID 1,
# no CAP_SYS_RESOURCE): crun refuses hybrid hosts ("cgroups in hybrid mode
# not supported") even with --cgroups=disabled, and --cgroups=disabled
# needs a private PID namespace; runc with the cgroupfs manager works, and
# the rlimits podman asks for must not exceed the caller's (no
# CAP_SYS_RESOURCE to raise them). RUNTIME=crun on a cgroup v2 host.
# Usage: dist/container/run-test.sh [IMAGE]  (default localhost/ntcore:latest)
set -euo pipefail

IMAGE=${1:-localhost/ntcore:latest}
PODMAN=${PODMAN:-podman}
RUNTIME=${RUNTIME:-runc}
SECCOMP=${SECCOMP:-unconfined}
T=$(mktemp -d /var/tmp/ntcore-ctr.XXXXXX)
BURNER=
trap '[ -n "$BURNER" ] && kill $BURNER 2>/dev/null; rm -rf "$T"' EXIT

cat >"$T/sched.conf" <<'CONF'
ntcore = { log_level = "info"; identity_labels = ["comm", "container", "pod"]; };
plugins = (
  { plugin = "sched"; interval_ms = 200; },
  { plugin = "file"; path = "/out/events.jsonl"; identity = true; metrics = true; interval_ms = 1000; }
);
CONF
/usr/bin/python3 -c '
import ctypes, time
ctypes.CDLL(None).prctl(15, b"nt-host-burner", 0, 0, 0)
end = time.time() + 30
while time.time() < end:
    pass' &
BURNER=$!

security=(--cap-drop=ALL --cap-add=BPF,PERFMON,SYS_PTRACE,DAC_READ_SEARCH)
[ "$SECCOMP" = default ] || security+=(--security-opt "seccomp=$SECCOMP")
cmd=("$PODMAN" --runtime "$RUNTIME" --cgroup-manager=cgroupfs run --rm --pid=host --network=none
	--ulimit nofile=4096:4096 --ulimit nproc=4096:4096 "${security[@]}" --read-only
	-v "$T:/out" -v /sys/kernel/tracing:/sys/kernel/tracing:ro
	"$IMAGE" -c /out/sched.conf -d 4)
echo "run-test.sh: ${cmd[*]}"
"${cmd[@]}" >"$T/log" 2>&1 || { cat "$T/log" >&2; echo "run-test.sh: FAIL: the container failed" >&2; exit 1; }
cat "$T/log"
/usr/bin/python3 - "$T/events.jsonl" "$BURNER" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pid = int(sys.argv[2])
mine = [e for e in ev if e["type"] == "sched.thread" and e["pid"] == pid]
on = sum(e["oncpu_ns"] for e in mine) / 1e9
pids = {e["pid"] for e in ev if e["type"] == "sched.thread"}
metrics = [e for e in ev if e["type"] == "metric" and e["name"].startswith("ntcore_sched_")]
with_pid = [m for m in metrics if "pid" in m.get("labels", {})]
burner_m = [m for m in metrics if m.get("labels", {}).get("comm") == "nt-host-burner"]
print("run-test.sh: %d events from %d host processes; the host burner (pid %d, %s) on-CPU %.2f s in %d events;"
      " %d sched metric lines, %d with a pid label, %d for comm nt-host-burner"
      % (len(ev), len(pids), pid, mine[0]["comm"] if mine else "-", on, len(mine), len(metrics), len(with_pid), len(burner_m)))
assert mine and mine[0]["comm"] == "nt-host-burner", "the host burner is not in the container's events"
assert on > 0.5, "the host burner's on-CPU time %.2f s" % on
assert len(pids) > 3, "only %d processes seen: not host-wide" % len(pids)
assert metrics and not with_pid, "metric lines with a pid label"
assert burner_m, "no metric series for the burner's comm"
PY
echo "run-test.sh: OK"
