#!/usr/bin/env python3
"""Checks ntcore's file-sink output against what dio.py did.

check.py DIO.json EVENTS.jsonl [--events]
The writer child must be attributed MIB MiB of writes, the reader MIB MiB of
reads, on the device of the file system holding the test file (or the
devices under it, for device-mapper), each with non-empty queue and service
latency histograms.

With --events (request_events = true and slow_threshold_ms = 0: every
request issued is an io.request event, every one completed an io.slow
event), the check is exact: the requests of each child that fall inside the
file's physical extents (FIEMAP) add up to exactly MIB MiB, the process
metrics equal the sum of all its io.request events, and what lies outside
the file is file-system metadata the child wrote itself (the inode block
fdatasync writes on this ext4 without a journal), at most METADATA_SLACK
bytes. Without it the process metric must lie in [MIB MiB, MIB MiB +
METADATA_SLACK].

Latency histograms count completed requests: on some kernels some
completions never reach the block_rq_complete tracepoint (on the project's
microVMs from 0.2% up to a fifth of a short run's requests when the machine
is busy), so their count may be below the number of requests (docs/io.md),
never above it, and never zero.
"""
import glob
import json
import os
import sys

METADATA_SLACK = 64 << 10


def fail(msg):
    sys.exit("io check: FAIL: " + msg)


def devices_under(dev):
    """The device and, for stacked devices (dm, md), the ones below it."""
    out = {dev}
    for s in glob.glob("/sys/dev/block/%s/slaves/*/dev" % dev):
        out |= devices_under(open(s).read().strip())
    return out


def name_of(dev):
    try:
        for line in open("/sys/dev/block/%s/uevent" % dev):
            if line.startswith("DEVNAME="):
                return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return dev


def main():
    dio = json.load(open(sys.argv[1]))
    want_events = "--events" in sys.argv
    events, metrics = [], {}
    for line in open(sys.argv[2]):
        if not line.strip():
            continue
        o = json.loads(line)
        if o["type"] == "metric":
            metrics[(o["name"], tuple(sorted(o.get("labels", {}).items())))] = o
        else:
            events.append(o)
    nbytes = dio["mib"] << 20
    devs = devices_under(dio["dev"])

    def series(name, **want):
        out = []
        for (mname, labels), m in metrics.items():
            labels = dict(labels)
            if mname == name and all(labels.get(k) == v for k, v in want.items()):
                out.append((labels, m))
        return out

    for op in ("write", "read"):
        pid = str(dio[op]["pid"])
        if dio[op]["bytes"] != nbytes:
            fail("the workload itself moved %d bytes" % dio[op]["bytes"])
        got = series("ntcore_io_process_bytes_total", pid=pid, op=op)
        on_dev = sum(m["value"] for labels, m in got if labels["dev"] in devs)
        if not nbytes <= on_dev <= nbytes + METADATA_SLACK:
            fail("%s: pid %s has %s bytes on %s, expected %d (series: %s)"
                 % (op, pid, on_dev, sorted(devs), nbytes,
                    [(l["dev"], m["value"]) for l, m in got]))
        for labels, m in got:
            if labels["dev"] in devs and labels["device"] != name_of(labels["dev"]):
                fail("device label %s for %s, expected %s" % (labels["device"], labels["dev"], name_of(labels["dev"])))
        reqs = sum(m["value"] for l, m in series("ntcore_io_process_requests_total", pid=pid, op=op)
                   if l["dev"] in devs)
        if reqs < 1:
            fail("%s: pid %s has no requests" % (op, pid))
        counts = []
        for hist in ("ntcore_io_process_queue_seconds", "ntcore_io_process_service_seconds"):
            hs = [m for l, m in series(hist, pid=pid, op=op) if l["dev"] in devs]
            count = sum(m["count"] for m in hs)
            counts.append(count)
            if not 0 < count <= reqs:
                fail("%s: %s{pid=%s} counts %d completions for %d requests" % (op, hist, pid, count, reqs))
            if not any(b[1] > 0 for m in hs for b in m["buckets"]):
                fail("%s: %s{pid=%s} is empty" % (op, hist, pid))
        svc = sum(m["sum"] for l, m in series("ntcore_io_process_service_seconds", pid=pid, op=op)
                  if l["dev"] in devs)
        if svc <= 0:
            fail("%s: zero service time" % op)
        dev_bytes = sum(m["value"] for l, m in series("ntcore_io_bytes_total", op=op) if l["dev"] in devs)
        if dev_bytes < nbytes:
            fail("%s: device total %d < %d" % (op, dev_bytes, nbytes))
        dev_svc = sum(m["count"] for l, m in series("ntcore_io_service_seconds", op=op) if l["dev"] in devs)
        if dev_svc < counts[1]:
            fail("%s: device service histogram counts %d < %d" % (op, dev_svc, counts[1]))
        if want_events:
            slow = [e for e in events if e["type"] == "io.slow" and e["pid"] == int(pid)
                    and e["op"] == op and e["dev"] in devs]
            if len(slow) != counts[1]:
                fail("%s: %d io.slow events, but the service histogram counts %d" % (op, len(slow), counts[1]))
            if any(e["latency_ns"] != e["queue_ns"] + e["service_ns"] or e["error"] not in (0, "0", "OK", "ok")
                   for e in slow):
                fail("%s: inconsistent io.slow event: %s" % (op, slow[0]))
            issued = [e for e in events if e["type"] == "io.request" and e["pid"] == int(pid)
                      and e["op"] == op and e["dev"] in devs]
            if len(issued) != reqs or sum(e["bytes"] for e in issued) != on_dev:
                fail("%s: %d io.request events with %d bytes, but the metrics say %d requests, %d bytes"
                     % (op, len(issued), sum(e["bytes"] for e in issued), reqs, on_dev))
            ext = dio.get("extents")
            if ext is not None and devs == {dio["dev"]}:
                base = 0
                try:  # requests carry whole-disk sectors; extents are partition-relative
                    base = int(open("/sys/dev/block/%s/start" % dio["dev"]).read()) * 512
                except OSError:
                    pass

                def in_file(e):
                    a = e["sector"] * 512 - base
                    return any(s0 <= a and a + e["bytes"] <= s0 + ln for s0, ln in ext)

                inside = sum(e["bytes"] for e in issued if in_file(e))
                outside = [e for e in issued if not in_file(e)]
                if inside != nbytes:
                    fail("%s: pid %s moved %d bytes inside the file's extents, expected exactly %d"
                         % (op, pid, inside, nbytes))
                if sum(e["bytes"] for e in outside) > METADATA_SLACK:
                    fail("%s: pid %s has %d bytes outside the file: %s" % (op, pid, sum(e["bytes"] for e in outside), outside))
                print("io check: %s: exactly %d bytes inside the file's %d extent(s), %d metadata bytes beside"
                      % (op, inside, len(ext), sum(e["bytes"] for e in outside)))
        print("io check: %s: pid %s, %d MiB in %d requests on %s, %d completions timed, service time %.1f ms"
              % (op, pid, dio["mib"], reqs, "/".join(name_of(d) for d in sorted(devs)), counts[1], svc * 1e3))
    reports = [e for e in events if e["type"] == "io.report"]
    if not reports or not any(name_of(d) in reports[-1]["text"] for d in devs):
        fail("no io.report naming the device")


if __name__ == "__main__":
    main()
