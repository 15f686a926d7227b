#!/bin/bash
# Integration test of the nvlink probe's NCCL side (issue 15, and issue
# 16's CPU part) against the stand-in libnccl.so.2, copied into a venv-like
# folder and dlopen()ed by a two-rank job after start (tests/fixtures/
# nvlink/nccl_job.c: two processes, one communicator of 2 ranks):
#  - per rank, exact calls and bytes of every NCCL function, the rank and
#    nranks labels, one communicator id shared by both ranks, collectives
#    numbered 1..13 in order, the group's calls and bytes on ncclGroupEnd,
#    host durations no shorter than the stand-in's transfer time;
#  - a rank that sleeps before its first all_reduce: one alert.nccl_hang
#    naming that rank, its pid, the call and its number, while the other
#    rank waits inside it;
#  - a rank that sleeps before the comm init: the other rank's
#    ncclCommInitRank is reported with the rank that has not joined;
#  - the system's libnccl (pncclX strong, ncclX weak): one probe per address.
# Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init nvlink "$@"
FX=$B/plugins/nvlink
[ -x "$FX/nccl_job" ] || fail "nccl_job not built"
nt_test_tmp nt-nvlink-nccl
unset LD_LIBRARY_PATH

# A fresh copy in a venv-like tree: an inode no probe is attached to yet.
V=$T/venv/lib/python3.12/site-packages/nvidia/nccl/lib
mkdir -p "$V"
cp "$FX/libnccl.so.2" "$V/"

job() { # job NAME TIMEOUT_MS JOB_ARGS...
	local name=$1 hang=$2
	shift 2
	cat > "$T/$name.conf" <<CONF
plugins = (
  { plugin = "nvlink"; interval_ms = 100; nvml = false; hang_timeout_ms = $hang; },
  { plugin = "file"; path = "$T/$name.jsonl"; metrics = true; }
);
CONF
	timeout 90 "$NTCORE" -c "$T/$name.conf" -- "$FX/nccl_job" "$V/libnccl.so.2" "$@" \
		> "$T/$name.out" 2> "$T/$name.err" ||
		{ cat "$T/$name.out" "$T/$name.err" >&2; fail "$name: ntcore or the job failed"; }
	grep -q "nccl_job: 2 ranks, 0 failed" "$T/$name.out" ||
		{ cat "$T/$name.out" >&2; fail "$name: the job failed"; }
}

# 1. Two ranks, every call counted.
job ranks 0 2
python3 - "$T/ranks.jsonl" "$V/libnccl.so.2" <<'PY' || { cat "$T/ranks.err" >&2; fail "two-rank job: calls or bytes differ"; }
import json, sys, collections
ev = [json.loads(l) for l in open(sys.argv[1])]
errs = []
libs = [e for e in ev if e["type"] == "nccl.library" and e["path"].endswith(sys.argv[2])]
if len(libs) != 1 or libs[0]["n_probes"] != 13:
    errs.append(f"late-loaded library: {libs}")
inits = sorted((e["rank"], e["pid"], e["name"], e["communicator"], e["nranks"])
               for e in ev if e["type"] == "nccl.comm_init")
if [(r, n, k) for r, _, n, _, k in inits] != [(0, "ncclCommInitRank", 2), (1, "ncclCommInitRankConfig", 2)] \
        or inits[0][3] != inits[1][3] or inits[0][3] in ("0x0", "0"):
    errs.append(f"comm inits: {inits}")
pid_of = {r: p for r, p, *_ in inits}
m = {}
for e in ev:
    if e["type"] == "metric" and e["name"].startswith("ntcore_nvlink_nccl_"):
        m[(e["name"], tuple(sorted(e["labels"].items())))] = e["value"]
AR = 3 * 4 * (1024 + 65536 + 1048576)
want = {  # call: (calls, bytes) per rank
    "ncclAllReduce": (9, AR), "ncclAllGather": (1, 4096 * 2),
    "ncclReduceScatter": (1, 2048 * 2), "ncclBroadcast": (1, 8000),
    "ncclReduce": (1, 4000), "ncclSend": (1, 1024), "ncclRecv": (1, 1024),
}
for rank in (0, 1):
    lab = dict(pid=str(pid_of[rank]), comm="nccl_job", rank=str(rank), nranks="2")
    for call, (n, b) in want.items():
        k = tuple(sorted(dict(lab, call=call).items()))
        if m.get(("ntcore_nvlink_nccl_calls_total", k)) != n:
            errs.append(f"rank {rank} {call}: calls {m.get(('ntcore_nvlink_nccl_calls_total', k))}, want {n}")
        if m.get(("ntcore_nvlink_nccl_bytes_total", k)) != b:
            errs.append(f"rank {rank} {call}: bytes {m.get(('ntcore_nvlink_nccl_bytes_total', k))}, want {b}")
    calls = collections.Counter()
    for (name, labels), v in m.items():
        d = dict(labels)
        if name == "ntcore_nvlink_nccl_calls_total" and d["pid"] == str(pid_of[rank]):
            calls[d["call"]] += v
    init = "ncclCommInitRank" if rank == 0 else "ncclCommInitRankConfig"
    expect = dict((c, n) for c, (n, _) in want.items())
    expect.update({init: 1, "ncclGroupStart": 1, "ncclGroupEnd": 1, "ncclCommDestroy": 1})
    if dict(calls) != expect:
        errs.append(f"rank {rank} calls: {dict(calls)}, want {expect}")
    co = [e for e in ev if e["type"] == "nccl.collective" and e["pid"] == pid_of[rank]]
    seqs = [e["seq"] for e in co if e["seq"]]
    if seqs != list(range(1, 14)):
        errs.append(f"rank {rank} collective numbers {seqs}")
    if any(e["rank"] != rank or e["nranks"] != 2 or e["communicator"] != inits[0][3] for e in co):
        errs.append(f"rank {rank}: events with another rank or communicator")
    ge = [e for e in co if e["name"] == "ncclGroupEnd"]
    if len(ge) != 1 or ge[0]["calls"] != 2 or ge[0]["bytes"] != 2048:
        errs.append(f"rank {rank} group end: {ge}")
    if [e["in_group"] for e in co if e["name"] in ("ncclSend", "ncclRecv")] != [True, True]:
        errs.append(f"rank {rank}: send/recv not marked in_group")
    big = [e for e in co if e["name"] == "ncclAllReduce" and e["bytes"] == 4194304]
    # the stand-in moves 4 MiB at 10 GB/s: at least 419 us inside the call
    if len(big) != 3 or min(e["duration_ns"] for e in big) < 419000:
        errs.append(f"rank {rank} 4 MiB all_reduce durations {[e['duration_ns'] for e in big]}")
    bw = [v for (name, labels), v in m.items() if name == "ntcore_nvlink_nccl_algbw_bytes_per_second"
          and dict(labels)["pid"] == str(pid_of[rank]) and dict(labels)["call"] == "ncclAllReduce"]
    if not bw or not all(0 < x < 20e9 for x in bw):
        errs.append(f"rank {rank} algbw {bw}")
if [e for e in ev if e["type"].startswith("alert.")]:
    errs.append("alerts in a job that does not hang")
if errs:
    print("\n".join(errs)); sys.exit(1)
print("ok: ranks", pid_of)
PY
echo "ok - two ranks: calls, bytes, numbers and groups exact per rank"

# 2. Rank 1 sleeps 3 s before its first all_reduce; hang timeout 1 s.
job late 1000 2 1 3000
python3 - "$T/late.jsonl" <<'PY' || { cat "$T/late.err" >&2; fail "rank that does not join: not reported as it should be"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pid_of = {e["rank"]: e["pid"] for e in ev if e["type"] == "nccl.comm_init"}
al = [e for e in ev if e["type"] == "alert.nccl_hang"]
errs = []
if len(al) != 1:
    errs.append(f"{len(al)} hang alerts, want 1: {al}")
else:
    a, d = al[0], json.loads(al[0]["evidence"])
    if (a["missing_rank"], a["rank"], a["call"], a["seq"], a["subject_pid"]) != \
            (1, 0, "ncclAllReduce", 1, pid_of[1]):
        errs.append(f"alert: {a}")
    if not d["blocked"] or d["missing_pid"] != pid_of[1] or d["waiting_pid"] != pid_of[0] \
            or d["bytes"] != 4096 or d["waiting_s"] < 1.0:
        errs.append(f"evidence: {d}")
    if f"rank 1 (pid {pid_of[1]}) has not joined ncclAllReduce #1" not in a["message"]:
        errs.append(f"message: {a['message']}")
if errs:
    print("\n".join(errs)); sys.exit(1)
print(al[0]["message"])
PY
echo "ok - a rank that does not join is reported with its rank, pid and call"

# 3. Rank 1 sleeps 3 s before its comm init.
job init 1000 2 1 -3000
python3 - "$T/init.jsonl" <<'PY' || { cat "$T/init.err" >&2; fail "comm init wait: not reported"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
al = [e for e in ev if e["type"] == "alert.nccl_hang"]
r0 = next(e["pid"] for e in ev if e["type"] == "nccl.comm_init" and e["rank"] == 0)
if len(al) != 1 or al[0]["call"] != "ncclCommInitRank" or al[0]["missing_rank"] != 1 \
        or al[0]["rank"] != 0 or al[0]["subject_pid"] != r0:
    print(f"alerts: {al}"); sys.exit(1)
print(al[0]["message"])
PY
echo "ok - a rank that does not join the comm init is reported"

# 4. NCCL as the system installs it: pncclX strong, ncclX weak aliases.
SYS=
for f in /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2; do
	[ -e "$f" ] && { SYS=$(readlink -f "$f"); break; }
done
if [ -n "$SYS" ]; then
	python3 - "$T/ranks.jsonl" "$SYS" <<'PY' || fail "system libnccl: one probe per entry point expected"
import json, os, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
lib = [e for e in ev if e["type"] == "nccl.library" and os.path.realpath(e["path"]) == sys.argv[2]]
# 20 entry points: each found once under nccl* or pnccl*, never twice
if len(lib) != 1 or lib[0]["n_probes"] != 20:
    print(f"{sys.argv[2]}: {lib}"); sys.exit(1)
print(f"ok: {sys.argv[2]}: {lib[0]['n_probes']} probes")
PY
else
	echo "(no system libnccl on this machine: the alias check ran on the stand-in only)"
fi
echo "PASS"
