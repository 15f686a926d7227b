#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Assertions of tests/integration/cuda_detectors.sh on the file sink's JSON
lines ($T/NAME.jsonl) and the workload's stdout ($T/NAME.out).
Usage: check.py SCENARIO TMPDIR [ARGS]"""
import glob
import json
import os
import sys

MiB = 1 << 20
GiB = 1 << 30


def fail(msg):
    print("FAIL %s: %s" % (SCEN, msg), file=sys.stderr)
    sys.exit(1)


def load(name):
    path = os.path.join(T, name + ".jsonl")
    if not os.path.exists(path):
        fail("no output file %s" % path)
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def stdout_vars(name):
    v = {}
    with open(os.path.join(T, name + ".out")) as f:
        for line in f:
            if "=" in line:
                k, _, x = line.strip().partition("=")
                v[k] = x
    return v


def alerts(evs, typ=None):
    res = []
    for e in evs:
        if not e["type"].startswith("alert."):
            continue
        if typ and e["type"] != typ:
            continue
        e = dict(e)
        e["ev"] = json.loads(e["evidence"])
        res.append(e)
    return res


def only(evs, typ, n=1):
    a = alerts(evs, typ)
    others = [x for x in alerts(evs) if x["type"] != typ]
    if len(a) != n:
        fail("expected %d %s, got %d: %s" % (n, typ, len(a), [x["message"] for x in a]))
    return a, others


def no_others(others, allowed=()):
    bad = [x for x in others if x["type"] not in allowed]
    if bad:
        fail("unexpected alerts: %s" % ["%s: %s" % (x["type"], x["message"]) for x in bad])


def s_leak():
    evs = load("leak")
    v = stdout_vars("leak")
    k = int(v["LEAK_BYTES"])
    a, others = only(evs, "alert.cuda_memleak")
    no_others(others)
    a = a[0]
    ev = a["ev"]
    if ev["kind"] != "exit":
        fail("the leak alert is not the exit report: %s" % a["message"])
    if ev["unfreed_bytes"] != k:
        fail("unfreed_bytes %d != planted %d" % (ev["unfreed_bytes"], k))
    mine = sum(s["bytes"] for s in ev["stacks"] if s["function"] == "leak_here")
    if mine != k:
        fail("bytes attributed to leak_here: %d != %d (%s)" % (mine, k, ev["stacks"]))
    if ev["unfreed_count"] != 4:
        fail("unfreed_count %d != 4" % ev["unfreed_count"])
    if "%d bytes" % k not in a["message"] or "leak_here" not in a["message"]:
        fail("message lacks the bytes or the function: %s" % a["message"])
    rep = [e for e in evs if e["type"] == "cuda_memleak.report"]
    if len(rep) != 1 or "leak_here" not in rep[0]["text"]:
        fail("no leak report text naming leak_here: %s" % rep)
    print("  leak: %s" % a["message"])


def s_grow():
    evs = load("grow")
    v = stdout_vars("grow")
    start = int(v["GROW_START"])
    al = alerts(evs, "alert.cuda_memleak")
    no_others([x for x in alerts(evs) if x["type"] != "alert.cuda_memleak"])
    if not al:
        fail("no growth alert")
    # one alert, then one per doubling of the high-water mark
    hw = [x["ev"]["live_bytes"] for x in al]
    if any(x["ev"]["kind"] != "growth" for x in al) or \
            any(hw[i + 1] < 2 * hw[i] for i in range(len(hw) - 1)):
        fail("alerts are not one per doubling: %s" % [x["message"] for x in al])
    a = al[0]
    ev = a["ev"]
    top = ev["top_stacks"][0]
    if top["function"] != "keep_tensor":
        fail("top stack is %s, not keep_tensor" % top["function"])
    lat = (a["ts"] - start) / 1e9
    if lat < 0 or lat > 2.0:
        fail("growth alert %.3f s after the growth began (want <= 2 s)" % lat)
    print("  grow: alert %.3f s after the trend began, p=%.3f, %d alert(s): %s"
          % (lat, ev["probability"], len(al), a["message"]))


def s_oom_launch(name="oom_launch"):
    import re
    evs = load(name)
    v = stdout_vars(name)
    oom_at = [int(v["OOM_AT_%d" % i]) for i in range(8)]
    if any(int(v["OOM_RET_%d" % i]) != 2 for i in range(8)):
        fail("a request did not fail with cudaErrorMemoryAllocation")
    al = sorted(alerts(evs, "alert.cuda_oom"), key=lambda a: a["ts"])
    if len(al) != 8:
        fail("%d alert.cuda_oom for 8 failures" % len(al))
    # the clock is read after the call returns, so on a loaded machine the
    # alert may come before it: its lower bound is the call's start
    called = [int(v["OOM_CALL_%d" % i]) for i in range(8)]
    lat = [(a["ts"] - t) / 1e6 for a, t in zip(al, oom_at)]
    early = [(a["ts"] - t) / 1e6 for a, t in zip(al, called)]
    if min(early) < -1:
        fail("alerts %s ms after their calls began (want >= 0)" % ["%.1f" % x for x in early])
    if max(lat) > 10:
        fail("alerts %s ms after their failed calls (want <= 10)" % ["%.1f" % x for x in lat])
    # every launch record read or counted: none dropped in the ring, and
    # the probe published at least one event per launch
    launches = int(v["LAUNCHES"])
    log = open(os.path.join(T, name + ".log")).read()
    m = re.search(r"^\s+cuda\.0\s+probe\s+\S+\s+(\d+)\s+\d+\s+(\d+)$", log, re.M)
    if not m:
        fail("no summary line for cuda.0")
    published, dropped = int(m[1]), int(m[2])
    if dropped or published < launches:
        fail("%d launches: %d events published, %d dropped" % (launches, published, dropped))
    print("  oom_launch: %d launches (%d events, 0 dropped); 8 alerts %.1f..%.1f ms after the failed calls"
          % (launches, published, min(lat), max(lat)))


def s_oom(name="oom"):
    stacks = name == "oom"
    evs = load(name)
    v = stdout_vars(name)
    if int(v["OOM_RET"]) != 2:
        fail("the workload's request did not fail with cudaErrorMemoryAllocation")
    t_fail = int(v["OOM_AT"])
    a, others = only(evs, "alert.cuda_oom")
    # the same failure is an API error too
    no_others(others, ("alert.cuda_errors",))
    a = a[0]
    ev = a["ev"]
    failed = [e for e in evs if e["type"] == "cuda.alloc" and e["ret"] != 0
              and e["size"] == 64 * GiB]
    if not failed:
        fail("no failed cuda.alloc event of 64 GiB")
    lat_call = (a["ts"] - t_fail) / 1e6
    lat_ev = (a["ts"] - min(e["ts"] for e in failed)) / 1e6
    if lat_call > 100 or lat_ev > 100:
        fail("alert %.1f ms after the failed call returned, %.1f ms after its event (want <= 100)%s"
             % (lat_call, lat_ev, "; the probe publishes the event only after symbolizing its "
                "stack: see the oom-nostack run for the detector's own latency" if stacks else ""))
    if ev["requested_bytes"] != 64 * GiB:
        fail("requested_bytes %d" % ev["requested_bytes"])
    if ev["live_bytes"] != 4 * GiB:
        fail("live_bytes %d != 4 GiB" % ev["live_bytes"])
    if stacks and ev["caller"] != "make_activations":
        fail("caller %s" % ev["caller"])
    recent = ev["recent_allocations"]
    # newest first: the scratch buffers of train_step (freed, but recent)
    if len(recent) != 8 or any(r["bytes"] != 64 * MiB or (stacks and r["function"] != "train_step")
                               for r in recent):
        fail("recent allocations: %s" % recent)
    if "largest_free_hole_bytes" not in ev or ev["error"] not in (
            "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"):
        fail("evidence lacks the hole or the error: %s" % ev)
    print("  %s: alert %.2f ms after the call returned (%.2f ms after its event): %s"
          % (name, lat_call, lat_ev, a["message"]))


def s_hang(name, timeout_ms, interval_ms):
    evs = load(name)
    v = stdout_vars(name)
    a, others = only(evs, "alert.cuda_hang")
    no_others(others)
    a = a[0]
    ev = a["ev"]
    # activity is a call's return: ts (its entry) + duration_ns; a blocked
    # copy returns after the report
    def end(e):
        return e["ts"] + e.get("duration_ns", 0)
    acts = [e for e in evs if e["type"] in ("cuda.launch", "cuda.memcpy", "cuda.sync")
            and e["pid"] == a["subject_pid"] and end(e) < a["ts"]]
    if not acts:
        fail("no GPU activity events of the target")
    last = max(end(e) for e in acts)
    quiet = int(v["QUIET_AT"])
    after = (a["ts"] - last) / 1e6
    # + 50 ms: timer jitter and ring-buffer delivery
    if after < timeout_ms or after > timeout_ms + interval_ms + 50:
        fail("hang reported %.1f ms after the last activity (want %d..%d)"
             % (after, timeout_ms, timeout_ms + interval_ms + 50))
    if abs(quiet - last) > 50e6:
        fail("last activity event %.1f ms from the workload's own mark" % ((quiet - last) / 1e6))
    ll = ev.get("last_launch")
    if not ll or ll["kernel"] != "wl_kernel" or ll["caller"] != "train_loop":
        fail("last launch: %s" % ll)
    blocked = name.endswith("blocked")
    if blocked:
        if a["severity"] != 2 or len(ev["blocked"]) != 1:
            fail("blocked thread not reported: %s" % ev["blocked"])
        b = ev["blocked"][0]
        # it entered the copy just after its last completed call
        if b["function"] != "cudaMemcpy" or not (timeout_ms - 100) / 1e3 <= b["blocked_s"] <= \
                (timeout_ms + interval_ms + 50) / 1e3:
            fail("blocked entry: %s" % b)
        if "blocked in cudaMemcpy" not in a["message"]:
            fail("message: %s" % a["message"])
        # the copy did return once released, and then counted as activity
        if not any(e["type"] == "cuda.memcpy" and end(e) > a["ts"] for e in evs):
            fail("the released copy's event is missing")
    elif ev["blocked"]:
        fail("no thread is blocked in a sync: %s" % ev["blocked"])
    busy = name.endswith("busy")
    if blocked:
        pass
    elif busy and "busy" not in a["message"]:
        fail("busy process not read as busy (cpu %.0f%%): %s" % (ev["cpu_percent"], a["message"]))
    elif not busy and "waits on something else" not in a["message"]:
        fail("idle process not read as waiting (cpu %.0f%%): %s" % (ev["cpu_percent"], a["message"]))
    print("  %s: alert %.1f ms after the last activity (timeout %d, interval %d): %s"
          % (name, after, timeout_ms, interval_ms, a["message"]))


def s_frag():
    evs = load("frag")
    v = stdout_vars("frag")
    if int(v["FRAG_FAIL_RET"]) != 2:
        fail("the 9 GiB request did not fail: %s" % v["FRAG_FAIL_RET"])
    fr = alerts(evs, "alert.cuda_frag")
    oom = alerts(evs, "alert.cuda_oom")
    no_others([x for x in alerts(evs) if x["type"] not in ("alert.cuda_frag", "alert.cuda_oom")],
              ("alert.cuda_errors",))
    if len(oom) != 1 or oom[0]["ev"]["requested_bytes"] != 9 * GiB:
        fail("expected one OOM alert of 9 GiB: %s" % [x["message"] for x in oom])
    oev = oom[0]["ev"]
    # the map when the 9 GiB request failed: 32 live blocks, 31 holes
    if oev["largest_free_hole_bytes"] != 256 * MiB or oev["holes"] != 31 \
            or oev["free_in_span_bytes"] != 31 * 256 * MiB or oev["live_bytes"] != 8 * GiB:
        fail("OOM evidence of the map: %s" % oev)
    score = [x for x in fr if x["ev"]["kind"] == "score"]
    if not score:
        fail("no fragmentation score alert: %s" % [x["message"] for x in fr])
    ev = score[0]["ev"]
    # the score alert comes from the first sample after the pattern formed
    if ev["score"] < 90 or ev["holes"] < 4 or ev["largest_hole_bytes"] != 256 * MiB:
        fail("fragmentation numbers: %s" % ev)
    if "large allocations will fail" not in score[0]["message"]:
        fail("no reading in: %s" % score[0]["message"])
    svgs = glob.glob(os.path.join(T, "frag-*-dev*.svg"))
    if len(svgs) != 1:
        fail("expected one SVG, found %s" % svgs)
    svg = open(svgs[0]).read()
    bars = svg.count(", freed at small_block") + svg.count("never freed at small_block")
    if bars != 64:
        fail("SVG has %d bars of small_block, want 64" % bars)
    if "failed allocation of 9.00 GiB" not in svg or "#e00000" not in svg:
        fail("SVG lacks the failed 9 GiB request in red")
    if "worst fragmentation" not in svg or \
            "31 holes, free in span 7.75 GiB, largest hole 256.00 MiB" not in svg:
        fail("SVG header lacks the worst map (31 holes, 7.75 GiB)")
    # geometry: at the worst moment's marker, 32 bars are live, with 31
    # gaps (the holes) between them along the address axis
    import re
    m = re.search(r'<line class="worst" x1="([0-9.]+)"', svg)
    if not m:
        fail("SVG has no marker of the worst moment")
    xw = float(m.group(1))
    live = []
    for r in re.finditer(r'<rect x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)" '
                         r'height="([0-9.]+)"[^>]*><title>[^<]*small_block', svg):
        x, y, w, h = map(float, r.groups())
        if x <= xw <= x + w:
            live.append((y, y + h))
    live.sort()
    gaps = sum(1 for a, b in zip(live, live[1:]) if b[0] - a[1] > 1.0)
    if len(live) != 32 or gaps != 31:
        fail("at the worst moment the SVG shows %d live blocks and %d holes (want 32, 31)"
             % (len(live), gaps))
    import xml.dom.minidom
    xml.dom.minidom.parseString(svg)  # well-formed
    print("  frag: score %.1f at the first sample (%d holes), 31 holes of 256 MiB at the failure; %s"
          % (ev["score"], ev["holes"], score[0]["message"]))


def s_errors():
    evs = load("errors")
    a = alerts(evs, "alert.cuda_errors")
    no_others([x for x in alerts(evs) if x["type"] != "alert.cuda_errors"])
    first = {}
    for x in a:
        key = (x["ev"]["function"], x["ev"]["error"])
        first.setdefault(key, x)
    free = first.get(("cudaFree", "cudaErrorInvalidValue"))
    copy = first.get(("cudaMemcpy", "cudaErrorInvalidValue"))
    if not free or not copy:
        fail("missing first alerts: %s" % list(first))
    if free["ev"]["caller"] != "double_free":
        fail("cudaFree caller: %s" % free["ev"]["caller"])
    # the probe records stacks at allocations, frees and launches: a
    # cudaMemcpy error carries one only if the probe took it
    cp_ev = [e for e in evs if e["type"] == "cuda.error" and e.get("api_name") == "cudaMemcpy"]
    if not cp_ev:
        fail("no cuda.error event for cudaMemcpy")
    if cp_ev[0].get("stack"):
        if copy["ev"]["caller"] != "bad_copy":
            fail("cudaMemcpy caller: %s" % copy["ev"]["caller"])
    else:
        if "(no stack)" not in copy["message"] or copy["ev"]["first_stack"]:
            fail("cudaMemcpy without a stack: %s" % copy["message"])
        print("  note: the probe gave no stack for the cudaMemcpy error")
    if free["ev"]["count"] != 1 or not free["ev"]["first_stack"]:
        fail("first cudaFree alert: %s" % free["ev"])
    # repeats summed up once, at the end (interval 60 s)
    rep = [x for x in a if x["ev"]["function"] == "cudaFree"
           and x["ev"]["error"] == "cudaErrorInvalidValue" and x["ev"]["count"] > 1]
    if len(rep) != 1 or rep[0]["ev"]["count"] != 50 or rep[0]["ev"]["new_since_last_alert"] != 49:
        fail("cudaFree repeats: %s" % [x["ev"] for x in rep])
    # every (function, error) pair alerted at most twice (first + summary)
    for k in first:
        n = sum(1 for x in a if (x["ev"]["function"], x["ev"]["error"]) == k)
        if n > 2:
            fail("%s alerted %d times" % (k, n))
    print("  errors: %d alerts for %d distinct errors; %s" % (len(a), len(first), free["message"]))


def s_clean():
    evs = load("clean")
    no_others(alerts(evs))
    n = sum(1 for e in evs if e["type"] == "cuda.alloc")
    if n < 100:
        fail("only %d allocation events: is the probe working?" % n)
    print("  clean: no alert over %d allocations" % n)


SCEN = sys.argv[1]
T = sys.argv[2]
if SCEN.startswith("hang-"):
    s_hang(SCEN, int(sys.argv[3]), int(sys.argv[4]))
elif SCEN == "oom_launch":
    s_oom_launch()
elif SCEN.startswith("oom"):
    s_oom(SCEN)
else:
    globals()["s_" + SCEN]()
