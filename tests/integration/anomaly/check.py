#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the alert.anomaly records of tests/integration/anomaly.sh.

  check.py change JSONL WORK KIND REGEX WITHIN_S
      an alert of KIND whose message matches REGEX within WITHIN_S seconds
      after the workload's change, and no alert.anomaly before the change
      (but for disk stalls, as below)
  check.py step JSONL WORK REGEX MAX_STEPS
      a step alert whose message matches REGEX while the workload was at
      most MAX_STEPS steps past the slow one, its step number within them,
      and no alert before the slow step (but for disk stalls)
  check.py none JSONL [WORK...]
      no alert.anomaly, except within 3 s of an io.slow record (a request
      the shared disk took >= 200 ms for: a real stall, printed), or a step
      alert in the 5 s after a step that the workload (its WORK log)
      itself timed at twice its median step or more (printed)
"""
import json
import math
import re
import statistics
import sys


def alerts(path):
    out = []
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "alert.anomaly":
                out.append(e)
    return out


def show(al):
    return "\n".join("  %s %s: %s" % (a["ts"], a.get("kind"), a.get("message"))
                     for a in al) or "  (none)"


def stall_of(path, a):
    """The worst io.slow (a request the disk took >= 200 ms for) within 3 s
    of alert a, in ms, or None."""
    worst = None
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            if e.get("type") == "io.slow" and abs(e["ts"] - a["ts"]) <= 3e9:
                worst = max(worst or 0, e["latency_ns"] / 1e6)
    return worst


def slow_step_of(logs, a):
    """For a step alert: the slowest step of the workloads' own logs that
    ended in the 5 s before it (a slow step's alert waits up to 5 s for its
    reason), and their median step, if it took at
    least twice the median (a real slow step, seen by the workload's own
    clock: the machine stalled it)."""
    if a.get("kind") != "step":
        return None
    for log in logs:
        m = log.get("step_ns", [])
        d = [(m[i + 1] - m[i], m[i + 1]) for i in range(len(m) - 1)]
        if not d:
            continue
        med = statistics.median(x for x, _ in d)
        near = [x for x, end in d if a["ts"] - 5e9 <= end <= a["ts"]]
        if near and max(near) >= 2 * med:
            return max(near) / 1e6, med / 1e6
    return None


def unexplained(path, al, logs=()):
    """The alerts that neither a disk stall nor a slow step seen by the
    workload itself explains; the others are printed."""
    left = []
    for a in al:
        w = stall_of(path, a)
        st = slow_step_of(logs, a)
        if w is not None:
            print("check.py: tolerated, the disk stalled %.0f ms then: %s" % (w, a["message"]))
        elif st is not None:
            print("check.py: tolerated, the workload itself took %.0f ms for a step "
                  "(median %.0f ms) then: %s" % (st[0], st[1], a["message"]))
        else:
            left.append(a)
    return left


def fail(msg, al):
    sys.exit("check.py: FAIL: %s\nalerts:\n%s" % (msg, show(al)))


def change(path, work, kind, regex, within):
    al = alerts(path)
    w = json.load(open(work))
    t0 = w["change_ns"]
    early = unexplained(path, [a for a in al if a["ts"] < t0])
    if early:
        fail("%d alert(s) before the change" % len(early), al)
    hit = [a for a in al if a.get("kind") == kind and re.search(regex, a["message"])
           and t0 <= a["ts"] <= t0 + within * 1e9]
    if not hit:
        fail("no %s alert matching /%s/ within %g s of the change" % (kind, regex, within), al)
    print("check.py: %.2f s after the change: %s" % ((hit[0]["ts"] - t0) / 1e9, hit[0]["message"]))


def step(path, work, regex, max_steps):
    al = alerts(path)
    w = json.load(open(work))
    slow, marks = w["slow_at"], w["step_ns"]
    early = unexplained(path, [a for a in al if a["ts"] < marks[slow]], [w])
    if early:
        fail("%d alert(s) before the slow step" % len(early), al)
    hit = [a for a in al if a.get("kind") == "step" and re.search(regex, a["message"])
           and a["ts"] >= marks[slow]]
    if not hit:
        fail("no step alert matching /%s/" % regex, al)
    a = hit[0]
    at = sum(1 for t in marks if t <= a["ts"]) - 1  # the step running then
    print("check.py: slow from step %d; alert while step %d ran (%d steps later), "
          "ntcore's step %d: %s" % (slow, at, at - slow, a["step"], a["message"]))
    if at - slow > max_steps:
        fail("flagged %d steps after the slow one (at most %d)" % (at - slow, max_steps), al)
    # Python steps come in batches (python.calls every report interval, 1 s
    # of ~10 steps): the number is the returns the last report had seen,
    # which lags the program by a batch and a half, two when the machine is
    # loaded (CI saw a lag of 16 steps of 92 ms)
    gaps = sorted(b - a_ for a_, b in zip(marks[:slow], marks[1:slow + 1]))
    per_report = math.ceil(1e9 / gaps[len(gaps) // 2]) if gaps else 15
    if not slow - 2 * per_report <= a["step"] <= slow + max_steps + 1:
        fail("the alert names step %d, the slow one is %d" % (a["step"], slow), al)


def main():
    a = sys.argv[1:]
    if a[0] == "change":
        change(a[1], a[2], a[3], a[4], float(a[5]))
    elif a[0] == "step":
        step(a[1], a[2], a[3], int(a[4]))
    elif a[0] == "none":
        al = alerts(a[1])
        logs = [json.load(open(p)) for p in a[2:]]
        left = unexplained(a[1], al, logs)
        if left:
            fail("%d alert(s) in a quiet run" % len(left), left)
        print("check.py: no alert without a disk stall")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
