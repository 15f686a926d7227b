# SPDX-License-Identifier: MIT
"""Checks for tests/gpu/nvlink.sh and nvlink2.sh: compare what ntcore's
nvlink probe published (the file sink's JSON Lines, metrics included) with
what the job itself did and with nvidia-smi. Each check prints one line per
finding, "ok - ..." or "FAIL - ...", appends its numbers to SUMMARY (a JSON
Lines file) and exits 1 when something failed.

  util   NTCORE_JSONL SMI_CSV JOB_JSON SUMMARY
  cost   STEPS_JSON WINDOWS SUMMARY
  nccl1  NTCORE_JSONL JOB_JSON SUMMARY
  nccl2  NTCORE_JSONL JOB_JSON SUMMARY [algbw]
  p2p    NTCORE_JSONL JOB_JSON SUMMARY
  hang   NTCORE_JSONL JOB_JSON SUMMARY
"""
import json
import statistics
import sys

FAILED = []


def report(ok, what):
    print(("ok - " if ok else "FAIL - ") + what)
    if not ok:
        FAILED.append(what)


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def summary(path, check, **numbers):
    with open(path, "a") as f:
        f.write(json.dumps(dict(check=check, **numbers)) + "\n")


def series(ev, name, **labels):
    """(ts ns, value) of one metric series, in time order."""
    out = []
    for e in ev:
        if e["type"] == "metric" and e["name"] == name and \
                all(e["labels"].get(k) == v for k, v in labels.items()):
            out.append((e["ts"], e.get("value")))
    return out


def at(points, ts):
    """The value of the snapshot nearest to ts (within 1 s), or None."""
    best = min(points, key=lambda p: abs(p[0] - ts), default=None)
    return best[1] if best and abs(best[0] - ts) <= 1_000_000_000 else None


def check_util(jsonl, smi_csv, job_json, out):
    ev, job = load(jsonl), json.load(open(job_json))
    steps = job["steps"]
    lo, hi = steps[0][0] + 3_000_000_000, steps[-1][0] - 1_000_000_000
    util = series(ev, "ntcore_nvlink_gpu_utilization_ratio", gpu="0")
    used = series(ev, "ntcore_nvlink_memory_used_bytes", gpu="0")
    rows, pairs = [], []
    for line in open(smi_csv):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 4 or not f[0].isdigit():
            continue
        ts, u, mem_mib = int(f[0]), float(f[1]), float(f[3])
        if not lo <= ts <= hi:
            continue
        nu, nm = at(util, ts), at(used, ts)
        if nu is None or nm is None:
            continue
        rows.append((ts, u, nu * 100, mem_mib, nm / 2**20))
    report(len(rows) >= 5, f"{len(rows)} nvidia-smi samples matched to ntcore snapshots within 1 s")
    if not rows:
        return
    smi_u = [r[1] for r in rows]
    nt_u = [r[2] for r in rows]
    report(min(nt_u) >= 90, f"utilisation during the matmul loop: ntcore min {min(nt_u):.0f} % "
           f"median {statistics.median(nt_u):.0f} % (nvidia-smi min {min(smi_u):.0f} %)")
    diffs = [abs(r[4] - r[3]) / r[3] for r in rows if r[3] > 0]
    report(max(diffs) <= 0.01, f"memory used: ntcore {rows[-1][4]:.0f} MiB vs nvidia-smi "
           f"{rows[-1][3]:.0f} MiB, worst difference {max(diffs) * 100:.3f} %")
    for name in ("power_watts", "temperature_celsius", "sm_clock_hertz"):
        p = series(ev, "ntcore_nvlink_" + name, gpu="0")
        print(f"   {name}: last {p[-1][1] if p else None}")
    summary(out, "util", samples=len(rows), ntcore_util_min=min(nt_u),
            smi_util_min=min(smi_u), mem_diff_max=max(diffs))


def check_cost(steps_json, windows, out):
    steps = json.load(open(steps_json))["steps"]
    wins = [tuple(int(x) for x in line.split()) for line in open(windows) if line.strip()]
    first, last = steps[0][0] + 2_000_000_000, steps[-1][0]
    def inside(t):  # poller running for at least 1 s
        return any(a + 1_000_000_000 <= t <= b for a, b in wins)
    def edge(t):  # starting, or just stopped
        return any(a <= t <= b + 1_000_000_000 for a, b in wins) and not inside(t)
    s_on = [d for t, d in steps if first <= t <= last and inside(t)]
    s_off = [d for t, d in steps if first <= t <= last and not inside(t) and not edge(t)]
    report(len(s_on) >= 20 and len(s_off) >= 20, f"steps: {len(s_on)} with the NVML poller, {len(s_off)} without")
    if not s_on or not s_off:
        return
    m_on, m_off = statistics.median(s_on), statistics.median(s_off)
    noise = statistics.pstdev(s_off) / m_off
    ratio = m_on / m_off
    report(abs(ratio - 1) <= max(0.01, 2 * noise / len(s_off) ** 0.5),
           f"median step {m_on / 1e6:.3f} ms with the poller vs {m_off / 1e6:.3f} ms without "
           f"(ratio {ratio:.4f}, step noise {noise * 100:.2f} %)")
    summary(out, "cost", step_on_ms=m_on / 1e6, step_off_ms=m_off / 1e6, ratio=ratio,
            noise=noise, n_on=len(s_on), n_off=len(s_off))


def nccl_calls(ev, pid):
    """ncclAllReduce events of pid, by element count."""
    by = {}
    for e in ev:
        if e["type"] == "nccl.collective" and e["pid"] == pid and e["name"] == "ncclAllReduce":
            by.setdefault(e["count"], []).append(e)
    return by


def check_sizes(ev, pid, sizes, rank, nranks, label):
    by = nccl_calls(ev, pid)
    for s in sizes:
        got = by.get(s["count"], [])
        nbytes = sum(e["bytes"] for e in got)
        report(len(got) == s["calls"] and nbytes == s["bytes"],
               f"{label}: all_reduce of {s['count']} floats: {len(got)} calls, {nbytes} bytes "
               f"(job: {s['calls']}, {s['bytes']})")
        if got and not all(e["rank"] == rank and e["nranks"] == nranks and e["dtype"] == "float32"
                           and e["op"] == "sum" for e in got):
            report(False, f"{label}: rank/nranks/dtype/op of the {s['count']}-float calls")
    other = {c: len(v) for c, v in by.items() if c not in {s["count"] for s in sizes}}
    print(f"   {label}: other ncclAllReduce calls (torch's own): {other}")


def check_nccl1(jsonl, job_json, out):
    ev, job = load(jsonl), json.load(open(job_json))
    libs = [e["path"] for e in ev if e["type"] == "nccl.library"]
    report(any("nccl" in p for p in libs), f"libnccl probed: {libs}")
    inits = [e for e in ev if e["type"] == "nccl.comm_init" and e["pid"] == job["pid"]]
    report(any(e["nranks"] == 1 and e["rank"] == 0 for e in inits),
           f"comm init seen: {[(e['name'], e['rank'], e['nranks']) for e in inits]}")
    check_sizes(ev, job["pid"], job["sizes"], 0, 1, "world 1")
    summary(out, "nccl1", sizes=[(s["count"], s["calls"]) for s in job["sizes"]], libs=libs)


def check_nccl2(jsonl, job_json, out, algbw):
    ev, job = load(jsonl), json.load(open(job_json))
    inits = [e for e in ev if e["type"] == "nccl.comm_init"]
    ids = {e["communicator"] for e in inits if e["nranks"] == 2}
    report(len(ids) == 1, f"one communicator of 2 ranks: {[(e['pid'], e['rank']) for e in inits]}")
    res = []
    for r in job["ranks"]:
        check_sizes(ev, r["pid"], r["sizes"], r["rank"], 2, f"rank {r['rank']}")
        by = nccl_calls(ev, r["pid"])
        for s in r["sizes"]:
            got = by.get(s["count"], [])
            if not got:
                continue
            host = statistics.median(e["duration_ns"] for e in got)
            job_t = statistics.median(s["times_ns"])
            nt_bw = statistics.median(e["algbw"] for e in got)
            job_bw = s["count"] * 4 / (job_t / 1e9)
            res.append(dict(rank=r["rank"], count=s["count"], host_ns=host, job_ns=job_t,
                            ntcore_algbw=nt_bw, job_algbw=job_bw))
            print(f"   rank {r['rank']} {s['count']:>9} floats: host {host / 1e3:9.1f} us, "
                  f"job {job_t / 1e3:9.1f} us; algbw ntcore {nt_bw / 1e9:7.2f} GB/s, job {job_bw / 1e9:7.2f} GB/s")
    if algbw:
        # only the 256 MiB size: for smaller ones the job's own timing
        # (torch dispatch + synchronize, tens of us) is not negligible
        big = [x for x in res if x["count"] >= 60_000_000]
        for x in big:
            d = abs(x["ntcore_algbw"] - x["job_algbw"]) / x["job_algbw"]
            report(d <= 0.10, f"rank {x['rank']} {x['count']} floats: algbw within 10 % of the job's "
                   f"({d * 100:.1f} %)")
        report(len(big) == 2, f"{len(big)} rank(s) with the 256 MiB size compared, want 2")
    summary(out, "nccl2" + ("_algbw" if algbw else ""), results=res)


def link_total(ev, gpu, kind, ts):
    total = 0
    for link in range(18):
        v = at(series(ev, f"ntcore_nvlink_link_{kind}_bytes_total", gpu=str(gpu), link=str(link)), ts)
        total += v or 0
    return total


def check_p2p(jsonl, job_json, out):
    ev, job = load(jsonl), json.load(open(job_json))
    b = job["bytes"]
    t0, t1 = job["start_ns"] - 1_500_000_000, job["end_ns"] + 1_500_000_000
    tx0 = link_total(ev, 0, "tx", t1) - link_total(ev, 0, "tx", t0)
    rx1 = link_total(ev, 1, "rx", t1) - link_total(ev, 1, "rx", t0)
    pcie = [(at(series(ev, f"ntcore_nvlink_pcie_{k}_bytes_total", gpu=str(g)), t1) or 0) -
            (at(series(ev, f"ntcore_nvlink_pcie_{k}_bytes_total", gpu=str(g)), t0) or 0)
            for g in (0, 1) for k in ("tx", "rx")]
    print(f"   copied {b} bytes (peer access {job['peer_access']}); NVLink gpu0 tx {tx0:.0f}, "
          f"gpu1 rx {rx1:.0f}; PCIe deltas {pcie}")
    report(job["ok"], "the copy arrived")
    report(tx0 >= b and rx1 >= b, "NVLink data counters saw at least the bytes copied")
    report(tx0 <= b * 1.02 + 65536 and rx1 <= b * 1.02 + 65536,
           "NVLink data counters within 2 % of the bytes copied")
    report(max(pcie) < b / 10, "PCIe counters did not carry the copy")
    summary(out, "p2p", bytes=b, nvlink_tx0=tx0, nvlink_rx1=rx1, pcie=pcie)


def check_hang(jsonl, job_json, out):
    ev, job = load(jsonl), json.load(open(job_json))
    pid1 = next(r["pid"] for r in job["ranks"] if r["rank"] == 1)
    al = [e for e in ev if e["type"] == "alert.nccl_hang"]
    for a in al:
        print(f"   {a['message']}")
    hit = [a for a in al if a["missing_rank"] == 1 and a["subject_pid"] == pid1
           and a["call"] == "ncclAllReduce"]
    report(len(hit) >= 1, f"rank 1 (pid {pid1}) reported as not joining ncclAllReduce: {len(hit)} alert(s)")
    summary(out, "hang", alerts=[a["message"] for a in al])


def main():
    mode, a = sys.argv[1], sys.argv[2:]
    if mode == "util":
        check_util(a[0], a[1], a[2], a[3])
    elif mode == "cost":
        check_cost(a[0], a[1], a[2])
    elif mode == "nccl1":
        check_nccl1(a[0], a[1], a[2])
    elif mode == "nccl2":
        check_nccl2(a[0], a[1], a[2], len(a) > 3)
    elif mode == "p2p":
        check_p2p(a[0], a[1], a[2])
    elif mode == "hang":
        check_hang(a[0], a[1], a[2])
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
