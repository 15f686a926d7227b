# SPDX-License-Identifier: MIT
"""Driver of tests/gpu/overhead.sh (no torch needed here): starts each
workload of overhead_work.py once, then alternates windows without and with
ntcore attached to it (-p PID) inside that one process, so the process's
own run-to-run spread (allocator state, clocks, placement) cancels.

Method. A pair is two adjacent windows of `window_s` seconds each, one
without ntcore and one with it; the order flips every pair (off,on then
on,off) so a drift over time cancels. ntcore is started before its window
and the window begins only once ntcore said READY=1 on NOTIFY_SOCKET (every
plugin attached); it is stopped (SIGINT) after the window. Per window the
median step time; per pair the ratio on/off - 1; per configuration the
median of the pairs' ratios with their 25th-75th percentile and min..max.
The workload runs on CPUs `work_cpus`, ntcore on `nt_cpus` (taskset), so
the two do not take turns on one CPU; BPF programs run in the workload's
context whatever the pinning. Per window with ntcore: its attach time, its
peak RSS (VmHWM before the stop), the kernel time of its BPF programs
(run_time_ns from /proc/NTPID/fdinfo, kernel.bpf_stats_enabled=1) per step,
its own CPU time (its summary line) and its shutdown time.

  overhead_drive.py PLAN.json   (written by overhead.sh)
"""
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

P = json.load(open(sys.argv[1]))
O, T = P["out"], P["tmp"]
LOG = open(os.path.join(O, "overhead.log"), "a")


def log(msg):
    print(msg, flush=True)
    LOG.write(msg + "\n")
    LOG.flush()


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = (len(xs) - 1) * q
    lo = int(i)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (i - lo)


class Worker:
    def __init__(self, mode):
        self.mode, self.k = mode, 0
        self.ctl = os.path.join(T, "ctl-" + mode)
        os.makedirs(self.ctl, exist_ok=True)
        cmd = ["taskset", "-c", P["work_cpus"], P["py"], P["work"], mode,
               self.ctl, os.path.join(T, "data")]
        self.err = open(os.path.join(O, "work-%s.err" % mode), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.err, stderr=subprocess.STDOUT)
        ready = os.path.join(self.ctl, "ready")
        t0 = time.time()
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited %d before ready (work-%s.err)"
                                   % (mode, self.proc.returncode, mode))
            if time.time() - t0 > 180:
                raise RuntimeError(mode + ": not ready after 180 s")
            time.sleep(0.05)
        self.pid = int(open(ready).read())
        log("%s: ready in %.1f s (pid %d)" % (mode, time.time() - t0, self.pid))

    def window(self, window_s):
        k = self.k
        self.k += 1
        done = os.path.join(self.ctl, "done.%d" % k)
        with open(os.path.join(self.ctl, "go.%d" % k), "w") as f:
            f.write(str(window_s))
        while not os.path.exists(done):
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited %d (work-%s.err)"
                                   % (self.mode, self.proc.returncode, self.mode))
            time.sleep(0.002)
        return open(done).read()

    def close(self):
        open(os.path.join(self.ctl, "quit"), "w").close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bpf_progs(pid):
    """{prog_id: (run_time_ns, run_cnt)} of the BPF programs ntcore holds."""
    out = {}
    fd_dir = "/proc/%d/fd" % pid
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return out
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)) != "anon_inode:bpf-prog":
                continue
            info = dict(l.split(":", 1) for l in open("/proc/%d/fdinfo/%s" % (pid, fd)) if ":" in l)
        except OSError:
            continue
        out[int(info.get("prog_id", "0").strip() or 0)] = (
            int(info.get("run_time_ns", "0").strip() or 0),
            int(info.get("run_cnt", "0").strip() or 0))
    return out


def prog_names():
    """{prog_id: name} from bpftool (bundled; else on PATH), or {}: which
    program of a plugin costs what (one program serves many uprobes)."""
    tool = P.get("bpftool") or "bpftool"
    try:
        progs = json.loads(subprocess.run([tool, "-j", "prog", "show"], capture_output=True,
                                          timeout=20).stdout or b"[]")
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    return {p["id"]: p.get("name", "?") for p in progs if "id" in p}


def prog_delta(before, after, names):
    """{name: [ns, runs]} between two bpf_progs() snapshots."""
    out = {}
    for pid_, (ns, runs) in after.items():
        ns0, runs0 = before.get(pid_, (0, 0))
        if runs - runs0 <= 0:
            continue
        acc = out.setdefault(names.get(pid_, "prog%d" % pid_), [0, 0])
        acc[0] += ns - ns0
        acc[1] += runs - runs0
    return out


def family(pid):
    """pid and its descendants now (a DataLoader's workers): -p follows
    the forks made after the attach, not the children that exist."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open("/proc/%s/stat" % d).read()
                parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    out, todo = [pid], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


class Ntcore:
    """ntcore -c CONF -p PID (and its children), up once it sent READY=1."""

    def __init__(self, conf, pid, tag):
        self.tag = tag
        sock_path = os.path.join(T, "notify.sock")
        if os.path.exists(sock_path):
            os.unlink(sock_path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(sock_path)
        sock.settimeout(0.1)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        self.errpath = os.path.join(T, "nt-%s.err" % tag)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            ["taskset", "-c", P["nt_cpus"], P["nt"], "-c", conf] +
            [a for p in family(pid) for a in ("-p", str(p))],
            cwd=T, env=env, stdout=subprocess.DEVNULL, stderr=open(self.errpath, "w"))
        ready = False
        while not ready and time.monotonic() - self.t0 < 60:
            try:
                ready = b"READY=1" in sock.recv(4096)
            except socket.timeout:
                pass
            if self.proc.poll() is not None:
                break
        sock.close()
        self.attach_ms = (time.monotonic() - self.t0) * 1e3
        if not ready:
            self.stop()
            raise RuntimeError("ntcore (%s) not ready: %s" % (tag, self.tail()))
        self.bpf0 = bpf_progs(self.proc.pid)

    def tail(self):
        return open(self.errpath).read()[-800:]

    def sample(self):
        """Before the stop: peak RSS and BPF time since the window began."""
        hwm = 0
        try:
            for line in open("/proc/%d/status" % self.proc.pid):
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) // 1024
        except OSError:
            pass
        per = prog_delta(self.bpf0, bpf_progs(self.proc.pid), prog_names())
        return (hwm, sum(v[0] for v in per.values()), sum(v[1] for v in per.values()), per)

    def stop(self):
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stop_ms = (time.monotonic() - t0) * 1e3
        err = open(self.errpath).read()
        with open(os.path.join(O, "ntcore.log"), "a") as f:
            f.write("==== %s (rc %d)\n%s" % (self.tag, self.proc.returncode, err))
        m = re.search(r"own CPU time: ([\d.]+) s user, ([\d.]+) s system; peak RSS (\d+) MB", err)
        self.cpu_s = float(m[1]) + float(m[2]) if m else float("nan")
        self.peak_mb = int(m[3]) if m else 0
        return self.proc.returncode


def bpf_stats(on):
    """kernel.bpf_stats_enabled: each BPF run then reads the clock twice,
    which the headline configurations must not pay (it is on only where
    each plugin's share is measured)."""
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1" if on else "0")
    except OSError:
        pass


def launches_counted():
    """ntcore_cuda_launches_total in the last run's file sink (the worker
    is idle outside its windows, so this is the window's launches)."""
    last, path = {}, os.path.join(T, "ntcore-training.jsonl")
    for line in open(path) if os.path.exists(path) else []:
        if '"ntcore_cuda_launches_total"' in line:
            e = json.loads(line)
            if e.get("type") == "metric":  # snapshots: the last per series
                last[json.dumps(e.get("labels"), sort_keys=True)] = e.get("value", 0)
    return sum(last.values())


SKIP_STEPS = 2  # a window's first steps: after an attach or detach, not steady


def window_stats(text):
    """(median wall ms, median CPU ms) of a window's steps, its first
    SKIP_STEPS left out, and the steps counted."""
    rows = [[float(x) for x in line.split()] for line in text.split("\n") if line.strip()]
    if len(rows) > 2 * SKIP_STEPS + 3:
        rows = rows[SKIP_STEPS:]
    cpu = [r[1] for r in rows if len(r) > 1]
    return (statistics.median(r[0] for r in rows),
            statistics.median(cpu) if cpu else float("nan"), len(rows))


def run_config(w, name, conf, pairs, window_s, stats):
    """`pairs` interleaved pairs of windows on worker `w`."""
    rows, progs = [], {}
    bpf_stats(stats)
    for i in range(pairs):
        order = ("off", "on") if i % 2 == 0 else ("on", "off")
        row = {}
        for which in order:
            if which == "off":
                row["off"], row["cpu_off"], _ = window_stats(w.window(window_s))
                continue
            path = os.path.join(T, "ntcore-training.jsonl")
            if os.path.exists(path):
                os.unlink(path)
            nt = Ntcore(conf, w.pid, "%s-%s-%d" % (w.mode, name, i))
            on, cpu_on, nsteps = window_stats(w.window(window_s))
            hwm, ns, runs, per = nt.sample()
            for pname, (pns, pruns) in per.items():
                acc = progs.setdefault(pname, [0, 0, 0])
                acc[0] += pns
                acc[1] += pruns
                acc[2] += nsteps
            if name.startswith("cuda") and stats:
                keep_metrics(name)
            rc = nt.stop()
            launches = launches_counted() if name.startswith("cuda") else 0
            row.update(on=on, cpu_on=cpu_on, steps=nsteps, attach_ms=nt.attach_ms,
                       stop_ms=nt.stop_ms, hwm_mb=max(hwm, nt.peak_mb), bpf_ns=ns,
                       bpf_runs=runs, cpu_s=nt.cpu_s, rc=rc,
                       launches_per_step=launches / nsteps)
        row["ratio"] = row["on"] / row["off"] - 1
        row["cpu_ratio"] = row["cpu_on"] / row["cpu_off"] - 1
        rows.append(row)
    r = [x["ratio"] * 100 for x in rows]
    rc = [x["cpu_ratio"] * 100 for x in rows]
    res = {
        # the main thread's CPU per step before the closing sync: what the
        # probes add to the thread that launches (its spread is a wall
        # clock's fraction: no GPU clocks, no queue waits in it)
        "cpu_median_pct": statistics.median(rc), "cpu_p25_pct": pct(rc, 0.25),
        "cpu_p75_pct": pct(rc, 0.75),
        "workload": w.mode, "config": name, "pairs": len(rows),
        "median_pct": statistics.median(r), "p25_pct": pct(r, 0.25), "p75_pct": pct(r, 0.75),
        "min_pct": min(r), "max_pct": max(r),
        "step_off_ms": statistics.median(x["off"] for x in rows),
        "step_on_ms": statistics.median(x["on"] for x in rows),
        "attach_ms": statistics.median(x["attach_ms"] for x in rows),
        "stop_ms": statistics.median(x["stop_ms"] for x in rows),
        "peak_rss_mb": max(x["hwm_mb"] for x in rows),
        "bpf_us_per_step": statistics.median(x["bpf_ns"] / x["steps"] / 1e3 for x in rows),
        "bpf_runs_per_step": statistics.median(x["bpf_runs"] / x["steps"] for x in rows),
        "nt_cpu_s_per_window": statistics.median(x["cpu_s"] for x in rows),
        "bpf_stats": stats,
        "launches_per_step": statistics.median(x["launches_per_step"] for x in rows),
        "ntcore_failed": sum(1 for x in rows if x["rc"] not in (0,)),
        "rows": rows,
        # per program (stats on): µs per step, runs per step, ns per run
        "progs": sorted(([n, v[0] / 1e3 / max(v[2], 1), v[1] / max(v[2], 1),
                          v[0] / max(v[1], 1)] for n, v in progs.items()),
                        key=lambda x: -x[1])[:16] if stats else [],
    }
    res["bpf_pct_of_step"] = 100 * res["bpf_us_per_step"] / 1e3 / res["step_off_ms"]
    log("%-7s %-10s %+6.2f%% (p25..p75 %+.2f..%+.2f, min..max %+.2f..%+.2f, %d pairs; "
        "main-thread CPU %+.2f%% [%+.2f..%+.2f]) "
        "step %.3f -> %.3f ms; BPF %.1f us/step (%.2f%%), %.0f runs/step; attach %.0f ms, "
        "stop %.0f ms, peak RSS %d MB"
        % (w.mode, name, res["median_pct"], res["p25_pct"], res["p75_pct"], res["min_pct"],
           res["max_pct"], res["pairs"], res["cpu_median_pct"], res["cpu_p25_pct"],
           res["cpu_p75_pct"], res["step_off_ms"], res["step_on_ms"],
           res["bpf_us_per_step"], res["bpf_pct_of_step"], res["bpf_runs_per_step"],
           res["attach_ms"], res["stop_ms"], res["peak_rss_mb"]))
    for n, us, runs, nsr in res["progs"]:
        log("        %-24s %8.1f us/step %8.1f runs/step %7.0f ns/run" % (n, us, runs, nsr))
    with open(os.path.join(O, "results.jsonl"), "a") as f:
        f.write(json.dumps(res) + "\n")
    return res


def keep_metrics(name):
    """The cuda probe's call and launch counters of the last window
    (metrics-<name>.jsonl under OUT): which API calls each step makes."""
    path = os.path.join(T, "ntcore-training.jsonl")
    last = {}
    for line in open(path) if os.path.exists(path) else []:
        if '"type":"metric"' in line and '"ntcore_cuda_' in line:
            e = json.loads(line)
            last[(e.get("name"), json.dumps(e.get("labels"), sort_keys=True))] = line
    with open(os.path.join(O, "metrics-%s.jsonl" % name), "w") as f:
        f.writelines(last.values())


def run_oom(conf):
    w = Worker("oom")
    nt = Ntcore(conf, w.pid, "oom")
    out = w.window(0)
    nt.stop()
    w.close()
    v = dict(l.split("=", 1) for l in out.split() if "=" in l)
    alerts = []
    path = os.path.join(T, "oom.jsonl")
    for line in open(path) if os.path.exists(path) else []:
        e = json.loads(line)
        if e.get("type") == "alert.cuda_oom":
            alerts.append(e)
    alerts.sort(key=lambda a: a["ts"])
    with open(os.path.join(O, "oom-alerts.jsonl"), "w") as f:  # kept for a look
        f.writelines(json.dumps(a) + "\n" for a in alerts)
        f.write(out)
    failed = [i for i in range(8) if v.get("OOM_OK_%d" % i) == "1"]
    # each failure's first alert (the allocator's retries add info alerts)
    lat = []
    for i in failed:
        before, after = int(v["OOM_BEFORE_%d" % i]), int(v["OOM_AFTER_%d" % i])
        mine = [a for a in alerts if a["ts"] >= before]
        if mine:
            lat.append(((mine[0]["ts"] - after) / 1e6, (mine[0]["ts"] - before) / 1e6))
    m = re.search(r"^\s+cuda\.0\s+probe\s+\S+\s+(\d+)\s+\d+\s+(\d+)$",
                  open(os.path.join(O, "ntcore.log")).read().split("==== oom")[-1], re.M)
    res = {"workload": "oom", "failures": len(failed), "alerts": len(alerts),
           "launches": int(v.get("LAUNCHES", 0)),
           "cuda_published": int(m[1]) if m else -1, "cuda_dropped": int(m[2]) if m else -1,
           "latency_after_return_ms": [round(a, 2) for a, _ in lat],
           "latency_from_call_ms": [round(b, 2) for _, b in lat]}
    log("oom     launch_events on: %d failed requests, %d alerts; alert after the failed "
        "call's return: %s ms (from its start: max %.1f ms); %d launches, cuda events "
        "%d published, %d dropped"
        % (res["failures"], res["alerts"], res["latency_after_return_ms"],
           max((b for _, b in lat), default=float("nan")), res["launches"],
           res["cuda_published"], res["cuda_dropped"]))
    with open(os.path.join(O, "results.jsonl"), "a") as f:
        f.write(json.dumps(res) + "\n")
    return res


def main():
    t_start = time.monotonic()
    results = []
    for step in P["plan"]:
        left = P["budget_s"] - (time.monotonic() - t_start)
        if left < step.get("min_s", 20):
            log("skipped (time budget): %s" % json.dumps(step))
            continue
        try:
            if step["workload"] == "oom":
                results.append(run_oom(step["conf"]))
                continue
            w = Worker(step["workload"])
            try:
                for name, conf, pairs, stats in step["configs"]:
                    left = P["budget_s"] - (time.monotonic() - t_start)
                    if left < 4 * pairs * step["window_s"]:
                        log("skipped (time budget): %s %s" % (step["workload"], name))
                        continue
                    results.append(run_config(w, name, conf, pairs, step["window_s"], stats))
            finally:
                w.close()
        except Exception as e:  # one workload failing does not end the batch
            log("ERROR %s: %s" % (step["workload"], e))
    bpf_stats(False)
    log("total %.0f s" % (time.monotonic() - t_start))
    summary(results)


def summary(results):
    out = ["== tests/gpu/overhead.sh summary (median of interleaved pairs; spread p25..p75)"]
    bad = []
    for r in results:
        if r["workload"] == "oom":
            lat = r["latency_after_return_ms"]
            ok = r["failures"] == 8 and len(lat) == 8 and max(lat) <= 10
            out.append("OOM alert, launch_events on: %s ms after the failed calls; %d launches, "
                       "%d cuda events dropped  %s" % (lat, r["launches"], r["cuda_dropped"],
                                                       "PASS" if ok else "FAIL (<= 10 ms)"))
            if not ok:
                bad.append("oom")
            continue
        limit = P["limits"].get(r["config"], P["limits"].get("*", None))
        verdict = ""
        if limit is not None:
            ok = r["median_pct"] <= limit
            verdict = "PASS" if ok else "FAIL (<= +%g%%)" % limit
            if not ok:
                bad.append("%s/%s" % (r["workload"], r["config"]))
        bpf = ("BPF %6.1f us/step (%5.2f%%)" % (r["bpf_us_per_step"], r["bpf_pct_of_step"])
               if r["bpf_stats"] else "BPF (stats off)            ")
        out.append("%-7s %-11s %+6.2f%% [%+.2f..%+.2f] %2d pairs (thread CPU %+.2f%% [%+.2f..%+.2f]), "
                   "step %8.3f ms, %s, "
                   "ntcore CPU %.2f s/window, attach %4.0f ms, stop %4.0f ms, RSS %3d MB  %s"
                   % (r["workload"], r["config"], r["median_pct"], r["p25_pct"], r["p75_pct"],
                      r["pairs"], r["cpu_median_pct"], r["cpu_p25_pct"], r["cpu_p75_pct"],
                      r["step_off_ms"], bpf, r["nt_cpu_s_per_window"],
                      r["attach_ms"], r["stop_ms"], r["peak_rss_mb"], verdict))
        if r["launches_per_step"]:
            out.append("        (cuda counted %.0f kernel launches per step)" % r["launches_per_step"])
    rss = max((r["peak_rss_mb"] for r in results if r.get("config") == "training"), default=0)
    out.append("ntcore peak RSS under training.conf: %d MB  %s"
               % (rss, "PASS" if 0 < rss <= 64 else "FAIL (<= 64 MB)"))
    if not 0 < rss <= 64:
        bad.append("rss")
    out.append("RESULT: " + ("PASS" if not bad else "FAIL " + " ".join(bad)))
    text = "\n".join(out)
    print(text)
    open(os.path.join(O, "summary.txt"), "w").write(text + "\n")


if __name__ == "__main__":
    main()
