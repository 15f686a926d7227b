#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Assertions over what otlp_receiver.py recorded (JSON lines).

  check_otlp.py basic FILE K PID HOST BATCH   every record of the grpc_testgen
                                              workload, attribute by attribute,
                                              and the final metric points
  check_otlp.py count FILE K                  exactly K distinct records 0..K-1
  check_otlp.py fault K FILE...               union of receivers: no duplicate,
                                              received + dropped(queue_full) = K
  check_otlp.py metric FILE NAME [k=v ...]    print the last value of a series

Exits non-zero with a message naming the first mismatch.
"""
import json
import sys


def load(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def logs(recs):
    return [r for r in recs if r["kind"] == "log"]


def last_point(recs, name, **labels):
    """Value (or histogram point) of the last export of metric `name` whose
    point has the given attributes."""
    found = None
    for r in recs:
        if r["kind"] != "metric" or r["name"] != name:
            continue
        for p in r["points"]:
            a = {k: v[1] for k, v in p["attrs"].items()}
            if all(a.get(k) == v for k, v in labels.items()):
                found = (r, p)
    return found


def expect_value(recs, name, want, **labels):
    f = last_point(recs, name, **labels)
    if not f:
        fail("metric %s %s never arrived" % (name, labels))
    got = f[1].get("value")
    if got != want:
        fail("metric %s %s: got %r, want %r" % (name, labels, got, want))


def expected_attrs(i, pid):
    text = "bad\ufffd%d" % i if i % 100 == 0 else "event %d \u00e9" % i
    return {
        "ntcore.event.type": ["s", "grpc_testgen.event"],
        "process.pid": ["i", pid],
        "thread.id": ["i", pid],  # the generator runs on the loop thread
        "thread.name": ["s", "testgen"],
        "seq": ["i", i],
        "neg": ["i", -3 * i],
        "ratio": ["d", i / 4.0],
        "flag": ["b", bool(i & 1)],
        "small": ["i", i % 256],
        "mid": ["i", i % 65536],
        "word": ["i", (i * 7) & 0xffffffff],
        "label": ["s", "ev-%d" % (i % 10)],
        "text": ["s", text],
        "addr": ["s", "0x%x" % (0xdead0000 + i)],
        "ip": ["s", "10.1.2.3" if i % 2 == 0 else "::1"],
        "dev": ["s", "8:%d" % (i % 16)],
        "err": ["s", "ENOENT" if i % 3 == 0 else "0"],
    }


def seqs_of(ls):
    return [r["attrs"]["seq"][1] for r in ls]


def check_unique(seqs, k):
    seen = set()
    dup = [s for s in seqs if s in seen or seen.add(s)]
    if dup:
        fail("%d records arrived more than once (first seq %d)" % (len(dup), dup[0]))
    bad = [s for s in seen if not 0 <= s < k]
    if bad:
        fail("unexpected seq %d" % bad[0])
    return seen


def cmd_basic(path, k, pid, host, batch):
    k, pid, batch = int(k), int(pid), int(batch)
    recs = load(path)
    ls = logs(recs)
    if len(ls) != k:
        fail("%d log records arrived, want exactly %d" % (len(ls), k))
    seen = check_unique(seqs_of(ls), k)
    if len(seen) != k:
        fail("%d distinct seq, want %d" % (len(seen), k))
    res_want = {"service.name": ["s", "ntcore"],
                "service.instance.id": ["s", "%s:%d" % (host, pid)],
                "host.name": ["s", host]}
    prev = -1
    for r in ls:
        i = r["attrs"]["seq"][1]
        if i != prev + 1:
            fail("records out of order: seq %d after %d" % (i, prev))
        prev = i
        want = expected_attrs(i, pid)
        if r["attrs"] != want:
            diff = {kk: (r["attrs"].get(kk), want.get(kk))
                    for kk in set(want) | set(r["attrs"]) if r["attrs"].get(kk) != want.get(kk)}
            fail("seq %d: attributes differ (got, want): %s" % (i, diff))
        for kk, v in res_want.items():
            if r["resource"].get(kk) != v:
                fail("seq %d: resource %s = %r, want %r" % (i, kk, r["resource"].get(kk), v))
        if r["event_name"] != "grpc_testgen.event" or r["body"] != ["s", "grpc_testgen.event"]:
            fail("seq %d: event_name/body %r %r" % (i, r["event_name"], r["body"]))
        if r["severity"] != 9 or r["severity_text"] != "INFO":
            fail("seq %d: severity %r %r" % (i, r["severity"], r["severity_text"]))
        if r["scope"][0] != "ntcore":
            fail("seq %d: scope %r" % (i, r["scope"]))
        if not 0 < r["time"] <= r["observed"]:
            fail("seq %d: time %d observed %d" % (i, r["time"], r["observed"]))
        if r["dropped_attributes"] != 0:
            fail("seq %d: %d attributes dropped" % (i, r["dropped_attributes"]))
    reqs = [r for r in recs if r["kind"] == "request" and r["signal"] == "logs"]
    if any(r["records"] > batch for r in reqs):
        fail("a request carried more than batch_size=%d records" % batch)
    if len(reqs) < -(-k // batch):
        fail("%d requests for %d records with batch_size %d" % (len(reqs), k, batch))

    # metrics: counters, labelled counters, gauge, histogram, self-metrics
    half_even = (k + 1) // 2
    expect_value(recs, "ntcore_grpc_testgen_events_total", float(k))
    expect_value(recs, "ntcore_grpc_testgen_parity_total", float(half_even), parity="even")
    expect_value(recs, "ntcore_grpc_testgen_parity_total", float(k - half_even), parity="odd")
    expect_value(recs, "ntcore_grpc_testgen_last_seq", float(k - 1))
    c = [len(range(v, k, 4)) for v in range(4)]
    f = last_point(recs, "ntcore_grpc_testgen_value_seconds")
    if not f:
        fail("histogram ntcore_grpc_testgen_value_seconds never arrived")
    m, p = f
    if m["type"] != "histogram" or m["temporality"] != 2:
        fail("histogram type/temporality %r %r" % (m["type"], m.get("temporality")))
    if p["explicit_bounds"] != [0.001, 0.01, 0.1]:
        fail("explicit_bounds %r" % p["explicit_bounds"])
    want_b = [c[0], c[1] + c[2], c[3], 0]
    if p["bucket_counts"] != want_b or p["count"] != k:
        fail("histogram buckets %r count %r, want %r %r" % (p["bucket_counts"], p["count"], want_b, k))
    want_sum = c[1] * 0.005 + c[2] * 0.01 + c[3] * 0.05
    if p["sum"] != want_sum:
        fail("histogram sum %r, want %r" % (p["sum"], want_sum))
    if m["unit"] != "s":
        fail("histogram unit %r" % m["unit"])
    ev = last_point(recs, "ntcore_grpc_testgen_events_total")[0]
    if ev["type"] != "sum" or not ev["monotonic"] or ev["temporality"] != 2:
        fail("counter is not a monotonic cumulative sum: %r" % ev)
    g = last_point(recs, "ntcore_grpc_testgen_last_seq")[0]
    if g["type"] != "gauge":
        fail("gauge exported as %r" % g["type"])
    expect_value(recs, "ntcore_grpc_events_sent_total", float(k), instance="grpc.0")
    for reason in ("queue_full", "too_large", "permanent_error", "rejected",
                   "retry_exhausted", "shutdown"):
        expect_value(recs, "ntcore_grpc_events_dropped_total", 0.0,
                     instance="grpc.0", reason=reason)
    expect_value(recs, "ntcore_grpc_events_retried_total", 0.0, instance="grpc.0")
    exports = last_point(recs, "ntcore_grpc_exports_total", instance="grpc.0",
                         signal="logs", code="OK")
    if not exports or exports[1]["value"] != float(len(reqs)):
        fail("ntcore_grpc_exports_total{logs,OK} = %r, want %d requests" %
             (exports and exports[1]["value"], len(reqs)))
    n_metric_exports = len({(r["points"][0]["time"]) for r in recs
                            if r["kind"] == "metric" and r["name"] == "ntcore_grpc_testgen_events_total"})
    print("ok: %d records in %d requests, all %d attributes of each as expected; "
          "%d metric exports; histogram %r sum %r" %
          (k, len(reqs), len(expected_attrs(0, pid)), n_metric_exports, want_b, want_sum))


def cmd_count(path, k):
    k = int(k)
    ls = logs(load(path))
    seen = check_unique(seqs_of(ls), k)
    if len(seen) != k:
        fail("%d distinct records arrived, want %d" % (len(seen), k))
    print("ok: %d records, each once" % k)


def cmd_fault(k, *paths):
    k = int(k)
    per = [load(p) for p in paths]
    seqs = []
    for recs in per:
        seqs += seqs_of(logs(recs))
    seen = check_unique(seqs, k)
    final = per[-1]
    f = last_point(final, "ntcore_grpc_events_dropped_total", instance="grpc.0", reason="queue_full")
    if not f:
        fail("no final ntcore_grpc_events_dropped_total{reason=queue_full} at the last receiver")
    dropped = int(f[1]["value"])
    others = {}
    for reason in ("too_large", "permanent_error", "rejected", "retry_exhausted", "shutdown"):
        p = last_point(final, "ntcore_grpc_events_dropped_total", instance="grpc.0", reason=reason)
        others[reason] = p and p[1]["value"]
    if any(v != 0.0 for v in others.values()):
        fail("unexpected drops: %r" % others)
    sent = last_point(final, "ntcore_grpc_events_sent_total", instance="grpc.0")[1]["value"]
    retried = last_point(final, "ntcore_grpc_events_retried_total", instance="grpc.0")[1]["value"]
    qmax = max((p["value"] for r in final + per[0] if r["kind"] == "metric"
                and r["name"] == "ntcore_grpc_queue_events" for p in r["points"]), default=0)
    if dropped <= 0:
        fail("the outage dropped nothing: it did not outlast the queue bound")
    if len(seen) + dropped != k:
        fail("received %d + dropped %d = %d, want %d" % (len(seen), dropped, len(seen) + dropped, k))
    if int(sent) != len(seen):
        fail("ntcore_grpc_events_sent_total %r but %d received" % (sent, len(seen)))
    if retried <= 0:
        fail("no retries were counted during the outage")
    print("%d %d %d %d %d" % (len(seen), dropped, int(retried), int(qmax),
                              len(seqs_of(logs(per[0])))))


def cmd_metric(path, name, *kv):
    labels = dict(x.split("=", 1) for x in kv)
    f = last_point(load(path), name, **labels)
    if not f:
        fail("metric %s %r not found" % (name, labels))
    print(f[1].get("value", f[1].get("count")))


if __name__ == "__main__":
    cmds = {"basic": cmd_basic, "count": cmd_count, "fault": cmd_fault, "metric": cmd_metric}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        fail("usage: check_otlp.py basic|count|fault|metric ...")
    cmds[sys.argv[1]](*sys.argv[2:])
