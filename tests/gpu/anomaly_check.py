#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks tests/gpu/anomaly.sh's runs.

  anomaly_check.py slow JSONL LOG   the slowed loader is flagged within 3
                                    steps of the first slow step, the alert
                                    names the loader's I/O, none before
  anomaly_check.py clean JSONL LOG  no alert.anomaly at all
Prints the step numbers and the alert texts either way.
"""
import json
import statistics
import sys


def records(path, kind):
    out = []
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == kind:
                out.append(e)
    return out


def loop_step(marks, ts):
    return sum(1 for t in marks if t <= ts) - 1


def show_evidence(a):
    """The alert's evidence: for a step alert every series that moved
    (before -> after), for a rule its key, value and reference."""
    try:
        ev = json.loads(a.get("evidence") or "{}")
    except ValueError:
        print("  evidence (not JSON): %s" % a.get("evidence"))
        return
    for m in ev.get("moved", []):
        print("  moved: %s %.4g -> %.4g%s" % (m.get("series"), m.get("before", 0),
                                             m.get("after", 0),
                                             " (its own alarm)" if m.get("alarmed") else ""))
    if "rule" in ev:
        print("  rule %s on %s: value %.4g, reference %.4g" % (
            ev["rule"], ev.get("key"), ev.get("value", 0), ev.get("reference", 0)))


def slow(jsonl, logp):
    log = json.load(open(logp))
    marks, k = log["step_ns"], log["slow_at"]
    dur = [(b - a) / 1e9 for a, b in zip(marks, marks[1:])]
    base = statistics.median(dur[max(0, k - 100):k])
    first = next((i for i in range(k - 20, len(dur)) if dur[i] > 1.5 * base), None)
    print("loader slowed from batch %d; median step before %.1f ms; first step "
          "over 1.5x: %s (%.1f ms)" % (k, base * 1e3, first,
                                       dur[first] * 1e3 if first is not None else 0))
    print("steps %d..%d took (ms): %s" % (k - 2, k + 12, " ".join(
        "%.0f" % (d * 1e3) for d in dur[k - 2:k + 12])))
    al = records(jsonl, "alert.anomaly")
    ok = True
    for a in al:
        print("alert at loop step %d (ntcore's step %d, kind %s): %s" % (
            loop_step(marks, a["ts"]), a.get("step", 0), a.get("kind"), a["message"]))
        show_evidence(a)
    early = [a for a in al if first is not None and loop_step(marks, a["ts"]) < first]
    if early:
        print("FAIL: %d alert(s) before the first slow step" % len(early))
        ok = False
    steps_al = [a for a in al if a.get("kind") == "step"]
    if first is None or not steps_al:
        print("FAIL: no slow step seen" if first is None else "FAIL: no step alert")
        return False
    a = steps_al[0]
    late = loop_step(marks, a["ts"]) - first
    ev = json.loads(a["evidence"])
    moved = ev.get("moved", [])
    top = moved[0]["series"] if moved else ""
    pids = set(str(p) for p in log["worker_pids"])
    print("loader worker pids: %s" % " ".join(sorted(pids)))
    loader_io = top.startswith("ntcore_io_process_") and any(
        'pid="%s"' % p in top for p in pids)
    print("step alert %d step(s) after the first slow step; what moved most: %s "
          "(a loader worker's I/O: %s)" % (late, top or "(nothing)", loader_io))
    if late > 3:
        print("FAIL: flagged %d steps after the first slow step (at most 3)" % late)
        ok = False
    if not loader_io:
        print("FAIL: the alert does not name the loader's I/O")
        ok = False
    return ok


def clean(jsonl, logp):
    log = json.load(open(logp))
    marks = log["step_ns"]
    print("clean run: %d steps in %.1f min" % (len(marks), (log["end_ns"] - marks[0]) / 6e10))
    al = records(jsonl, "alert.anomaly")
    for a in al:
        print("alert at loop step %d (kind %s): %s" % (loop_step(marks, a["ts"]),
                                                       a.get("kind"), a["message"]))
        show_evidence(a)
    for s in records(jsonl, "io.slow"):
        print("io.slow: %s %.0f ms" % (s.get("comm"), s["latency_ns"] / 1e6))
    if al:
        print("FAIL: %d alert(s) in the clean run" % len(al))
        return False
    print("no alert")
    return True


if __name__ == "__main__":
    fn = {"slow": slow, "clean": clean}[sys.argv[1]]
    sys.exit(0 if fn(sys.argv[2], sys.argv[3]) else 1)
