#!/usr/bin/env python3
"""Checks for tests/integration/python*.sh: reads the file sink's JSON
Lines and asserts what the python probe must have seen. Exits non-zero
with a message on the first failed check."""
import json, os, re, sys

def die(msg):
    print("FAIL python: " + msg, file=sys.stderr)
    sys.exit(1)

def load(path):
    evs = []
    with open(path) as f:
        for line in f:
            evs.append(json.loads(line))
    return evs

def line_of(path, text):
    with open(path) as f:
        for i, l in enumerate(f, 1):
            if text in l:
                return i
    die("%s: no line with %r" % (path, text))

def attached(evs, version=None):
    procs = [e for e in evs if e["type"] == "python.process" and e["status"] == "OK"]
    if not procs:
        die("no python.process event with status OK: %s" %
            [e.get("message") for e in evs if e["type"] == "python.process"])
    if version and not any(e["version"] == version for e in procs):
        die("attached to %s, not %s" % ([e["version"] for e in procs], version))
    return procs[-1]["subject_pid"]

def check_abc(path, script, version, secs):
    evs = load(path)
    pid = attached(evs, version)
    L = lambda t: line_of(script, t)
    want = ";".join([
        "<module> (%s:%d)" % (script, L_main(script)),
        "main (%s:%d)" % (script, L("a(time.monotonic()")),
        "a (%s:%d)" % (script, L("return b(end)")),
        "b (%s:%d)" % (script, L("return c(end)")),
        "c (%s:%d)" % (script, L("while time.monotonic() < end")),
    ])
    leaf_d = "d (%s:%d)" % (script, L("time.sleep(600)"))
    stacks = [e for e in evs if e["type"] == "python.stack" and e["pid"] == pid]
    main_t = [e for e in stacks if e["tid"] == pid]
    total = sum(e["count"] for e in main_t)
    inabc = sum(e["count"] for e in main_t if e["stack"] == want)
    if total < secs * 99 * 0.5:
        die("main thread: only %d samples in %.1f s at 99 Hz" % (total, secs))
    if inabc < 0.9 * total:
        top = sorted(main_t, key=lambda e: -e["count"])[:3]
        die("main thread: %d of %d samples (%.1f%%) in %s; top: %s" %
            (inabc, total, 100.0 * inabc / total, want,
             [(e["stack"][-120:], e["count"]) for e in top]))
    others = {}
    for e in stacks:
        if e["tid"] != pid:
            others.setdefault(e["tid"], []).append(e)
    if not others:
        die("no samples of the sleeping thread")
    tid, ev = max(others.items(), key=lambda kv: sum(e["count"] for e in kv[1]))
    tot_d = sum(e["count"] for e in ev)
    in_d = sum(e["count"] for e in ev if e["stack"].endswith(";" + leaf_d))
    idle_d = sum(e["count"] for e in ev if e["stack"].endswith(";" + leaf_d) and e["state"] == "idle")
    if in_d < 0.9 * tot_d or tot_d < secs * 99 * 0.5:
        die("sleeping thread %d: %d of %d samples end in %s" % (tid, in_d, tot_d, leaf_d))
    if idle_d < 0.9 * in_d:
        die("sleeping thread: only %d of %d samples in d() are idle" % (idle_d, in_d))
    reports = [e for e in evs if e["type"] == "python.report"]
    if not reports or ("c (%s)" % script) not in reports[-1]["text"]:
        die("python.report lacks c (%s)" % script)
    print("ok: %s: main thread %d/%d samples (%.1f%%) in %s; thread %d: %d/%d in %s"
          % (version, inabc, total, 100.0 * inabc / total, want, tid, in_d, tot_d, leaf_d))

def L_main(script):
    with open(script) as f:
        for i, l in enumerate(f, 1):
            if l.rstrip("\n") == "main()":
                return i
    die("no main() line")

def check_folded(path, script):
    n = 0
    with open(path) as f:
        for line in f:
            if not re.match(r"^\S.* [0-9]+$", line.rstrip("\n")):
                die("folded line not 'frames count': %r" % line)
            n += 1
    if not n:
        die("empty folded file %s" % path)
    with open(path) as f:
        if ("c (%s:" % script) not in f.read():
            die("folded file lacks c()")
    print("ok: folded file: %d lines" % n)

def check_calls(path, script, n):
    evs = load(path)
    attached(evs, "3.11")
    calls = [e for e in evs if e["type"] == "python.calls"]
    f = [e for e in calls if e["function"] == "f" and e["file"] == script]
    got = sum(e["calls"] for e in f)
    if got != n:
        die("USDT: f() called %d times, probe says %d (%s)" % (n, got, f))
    if any(e["function"] == "g" for e in calls):
        die("g() does not match the pattern but was reported")
    for e in calls:
        if not (e["timed_calls"] <= e["calls"] and e["self_ns"] <= e["inclusive_ns"]
                and e["sampled_self_ns"] <= e["sampled_inclusive_ns"]):
            die("inconsistent python.calls: %s" % e)
    h = [e for e in calls if e["function"] == "h" and e["file"] == script]
    if sum(e["calls"] for e in h) != 3:
        die("h() (raises and catches) calls: %s" % h)
    main = [e for e in calls if e["function"] == "main" and e["file"] == script]
    if sum(e["calls"] for e in main) != 1:
        die("main(): %s" % main)
    timed = sum(e["timed_calls"] for e in f)
    samp = sum(e["sampled_inclusive_ns"] for e in main)
    print("ok: USDT: f() %d calls (%d timed by entry markers); main() sampled %.1f ms"
          % (got, timed, samp / 1e6))

def check_exc(path, script):
    evs = load(path)
    attached(evs, "3.11")
    ex = [e for e in evs if e["type"] == "python.exception" and e["file"] == script]
    def count(t, fn):
        return sum(e["count"] for e in ex if e["exc_type"] == t and e["function"] == fn)
    lv = line_of(script, "raise ValueError(i)")
    lk = line_of(script, "return d[k]")
    v = [e for e in ex if e["exc_type"] == "ValueError"]
    k = [e for e in ex if e["exc_type"] == "KeyError"]
    if count("ValueError", "boom") != 5 or any(e["line"] != lv for e in v):
        die("ValueError: want 5 at boom:%d, got %s" % (lv, v))
    if count("KeyError", "lookup") != 3 or any(e["line"] != lk for e in k):
        die("KeyError: want 3 at lookup:%d, got %s" % (lk, k))
    if not all(e["stack"].endswith("boom (%s:%d)" % (script, lv)) for e in v):
        die("ValueError stack: %s" % [e["stack"] for e in v])
    print("ok: exceptions: 5 ValueError at boom:%d, 3 KeyError at lookup:%d" % (lv, lk))

def check_refused(path, status, text):
    evs = load(path)
    ps = [e for e in evs if e["type"] == "python.process"]
    hit = [e for e in ps if e["status"] == status and text in e["message"]]
    if not hit:
        die("no python.process with status %s and %r: %s" %
            (status, text, [(e["status"], e["message"]) for e in ps]))
    if not any(e["type"] == "proc.exit" for e in evs):
        die("the file sink got no proc.exit: the run did not go on")
    print("ok: %s: %s" % (status, hit[0]["message"]))

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "abc":
        check_abc(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    elif what == "folded":
        check_folded(sys.argv[2], sys.argv[3])
    elif what == "calls":
        check_calls(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif what == "exc":
        check_exc(sys.argv[2], sys.argv[3])
    elif what == "refused":
        check_refused(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        die("unknown check " + what)
