#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark of ntcore's gRPC (OTLP) sink, driven by bench/grpc.sh.

The same workload (N grpc_testgen events, 17 attributes each, published as
fast as the loop allows) runs side by side through:
  gen-only   the generator alone (what the events cost ntcore before any sink)
  file       the file sink writing JSON Lines to /dev/null (a local peer)
  grpc       the gRPC sink exporting to the local Python OTLP receiver
  grpc+gzip  the same with gzip compression (full run only)
For each: ntcore's CPU time (user+sys from wait4), its CPU per 100k events,
the part the sink adds over gen-only, and for the gRPC runs the rate at which
the receiver got the records (first to last arrival) and any drops.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def run_ntcore(ntcore, conf, env, errpath, stop_when, timeout=120.0):
    """Run ntcore (stderr to errpath) until stop_when() holds, then SIGTERM;
    returns (wall s, CPU s of ntcore from wait4, stderr text, exit code)."""
    t0 = time.monotonic()
    with open(errpath, "w") as err:
        p = subprocess.Popen([ntcore, "-c", conf], env=env, stdout=subprocess.DEVNULL,
                             stderr=err)
    sent_term = False
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if not sent_term and (time.monotonic() - t0 > timeout or stop_when()):
            os.kill(p.pid, signal.SIGTERM)
            sent_term = True
        time.sleep(0.01)
    with open(errpath) as f:
        text = f.read()
    return (time.monotonic() - t0, ru.ru_utime + ru.ru_stime, text,
            os.waitstatus_to_exitcode(status))


def summary_of(text, inst):
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 6 and f[0] == inst:
            return int(f[3]), int(f[4]), int(f[5])
    return None


def main():
    build, src, n, full = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "full"
    ntcore = os.path.join(build, "core", "ntcore")
    env = dict(os.environ, NTCORE_PLUGIN_PATH=os.path.join(build, "sinks"))
    tmp = tempfile.mkdtemp(prefix="ntcore-grpc-bench.")
    gen = ('{ plugin = "grpc_testgen"; count = %d; per_tick = 2000; interval_ms = 1; }' % n)
    rows = []

    def conf(name, sinks):
        path = os.path.join(tmp, name + ".conf")
        with open(path, "w") as f:
            f.write('ntcore = { log_level = "info"; };\nplugins = (\n  %s%s\n);\n'
                    % (gen, "".join(",\n  " + s for s in sinks)))
        return path

    def local_run(name, sinks):
        """generator alone, or the file sink: stop once the generator says it
        published everything (the bus delivers synchronously)"""
        path = conf(name, sinks)
        errf = os.path.join(tmp, name + ".err")
        done = "published all %d events" % n

        def published():
            with open(errf) as f:
                return done in f.read()
        wall, cpu, text, rc = run_ntcore(ntcore, path, env, errf, published)
        s = summary_of(text, "file.0") if name == "file" else None
        return {"run": name, "wall": wall, "cpu": cpu, "rate": None,
                "out": s[1] if s else None, "dropped": s[2] if s else None, "rc": rc}

    def grpc_run(name, comp):
        """the gRPC sink against a fresh local receiver, until it has all"""
        port_file = os.path.join(tmp, name + ".port")
        count_file = os.path.join(tmp, name + ".count")
        out = os.path.join(tmp, name + ".jsonl")
        for f in (port_file, count_file, out):
            if os.path.exists(f):
                os.unlink(f)
        rx = subprocess.Popen(["/usr/bin/python3",
                               os.path.join(src, "tests/integration/grpc/otlp_receiver.py"),
                               "--proto", os.path.join(src, "sinks/grpc/proto"),
                               "--port-file", port_file, "--out", out, "--count-only",
                               "--count-file", count_file, "--workers", "2"])
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.05)
        port = int(open(port_file).read())
        path = conf(name, ['{ plugin = "grpc"; endpoint = "127.0.0.1:%d"; compression = "%s";'
                           ' batch_size = 1024; batch_timeout_ms = 5; queue_size = %d;'
                           ' queue_bytes = %d; metrics = false; }'
                           % (port, comp, n, max(n * 512, 1 << 20))])

        def received():
            try:
                return int(open(count_file).read())
            except (OSError, ValueError):
                return 0
        wall, cpu, text, rc = run_ntcore(ntcore, path, env, os.path.join(tmp, name + ".err"),
                                         lambda: received() >= n)
        rx.send_signal(signal.SIGTERM)
        rx.wait()
        summ = [json.loads(line) for line in open(out) if '"summary"' in line][-1]
        s = summary_of(text, "grpc.0")
        rate = (summ["records"] / (summ["last"] - summ["first"])
                if summ["records"] and summ["last"] > summ["first"] else None)
        return {"run": name, "wall": wall, "cpu": cpu, "rate": rate,
                "out": summ["records"], "dropped": s[2] if s else None, "rc": rc}

    # the runs interleave, `reps` rounds; each line reports the median round
    # by CPU (the machine may be shared)
    plan = [("gen-only", lambda: local_run("gen-only", [])),
            ("file", lambda: local_run("file", ['{ plugin = "file"; path = "/dev/null"; }'])),
            ("grpc", lambda: grpc_run("grpc", "none"))]
    if full:
        plan.append(("grpc+gzip", lambda: grpc_run("grpc+gzip", "gzip")))
    reps = 3 if full else 1
    got = {name: [] for name, _ in plan}
    for _ in range(reps):
        for name, fn in plan:
            got[name].append(fn())
    for name, _ in plan:
        runs = sorted(got[name], key=lambda r: r["cpu"])
        rows.append(runs[len(runs) // 2])
        if any(r["out"] is not None and r["out"] != n for r in runs if r["run"] != "gen-only"):
            rows[-1]["out"] = min(r["out"] for r in runs)

    shutil.rmtree(tmp, ignore_errors=True)
    base = rows[0]["cpu"]
    print("workload: %d grpc_testgen events (17 attributes each); median of %d interleaved rounds"
          % (n, reps))
    print("%-10s %7s %12s %16s %18s %14s %9s" % ("run", "wall s", "ntcore CPU s", "CPU ms/100k ev",
                                                 "sink CPU ms/100k", "exported ev/s", "dropped"))
    for r in rows:
        per = r["cpu"] / n * 1e5 * 1e3
        sink = (r["cpu"] - base) / n * 1e5 * 1e3
        print("%-10s %7.2f %12.3f %16.1f %18s %14s %9s" % (
            r["run"], r["wall"], r["cpu"], per,
            "-" if r["run"] == "gen-only" else "%.1f" % sink,
            "-" if r["rate"] is None else "%.0f" % r["rate"],
            "-" if r["dropped"] is None else r["dropped"]))
    by = {r["run"]: r for r in rows}
    g, f = by["grpc"], by["file"]
    if f["cpu"] > base:
        print("ratio: the gRPC sink costs %.2fx the CPU of the file sink per event"
              % ((g["cpu"] - base) / (f["cpu"] - base)))
    if g["out"] != n or (g.get("dropped") or 0) != 0:
        print("FAIL: the receiver got %s of %d events (dropped %s)" % (g["out"], n, g.get("dropped")))
        sys.exit(1)
    if "grpc+gzip" in by and by["grpc+gzip"]["out"] != n:
        print("FAIL: gzip run delivered %s of %d" % (by["grpc+gzip"]["out"], n))
        sys.exit(1)


if __name__ == "__main__":
    main()
