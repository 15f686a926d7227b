# SPDX-License-Identifier: MIT
"""Check the flight-recorder dump written for a planted hang (the
cuda_detectors hang workload, "blocked": a thread inside a cudaMemcpy that
does not return): its last seconds show the blocked call as an unfinished
slice on the blocked thread, from its entry to the dump, and the alert.
Usage: check_hang.py DUMP.pftrace TIMEOUT_MS"""
import json
import sys

import ptrace


def fail(msg):
    print(msg)
    sys.exit(1)


def main(path, timeout_ms):
    m = ptrace.load_perfetto(path)
    alerts = m.on(m.track_named("Alerts", "named"))
    hang = [a for a in alerts if "blocked in cudaMemcpy" in a.name]
    if len(hang) != 1:
        fail(f"alerts: {[a.name for a in alerts]}")
    a = hang[0]
    ev = json.loads(a.args["evidence"])
    blocked_tid = ev["blocked"][0].get("tid")
    open_ = [s for s in m.slices if s.cat == "open"]
    if len(open_) != 1 or open_[0].name != "cudaMemcpy" or open_[0].args != {"unfinished": True}:
        fail(f"unfinished calls: {[(s.name, s.args) for s in open_]}")
    s = open_[0]
    t = m.tracks[s.track]
    if t.kind != "thread" or t.pid != a.args["subject_pid"] or \
            (blocked_tid is not None and t.tid != blocked_tid):
        fail(f"the blocked call is on {t}, the alert names pid {a.args['subject_pid']} "
             f"tid {blocked_tid}")
    end = max(x.ts + x.dur for x in m.slices)
    if s.ts + s.dur != end:
        fail(f"the blocked call ends {(end - s.ts - s.dur) / 1e6:.1f} ms before the trace does")
    if not (a.ts - s.ts >= (timeout_ms - 100) * 1e6 and s.ts + s.dur >= a.ts):
        fail(f"blocked call [{s.ts}, +{s.dur}] vs the alert at {a.ts}")
    later = [x for x in m.on(t) if x.ts > s.ts]
    if later:
        fail(f"events on the blocked thread after its entry: {[(x.name, x.ts) for x in later]}")
    print(f"ok: {path.rsplit('/', 1)[-1]}: cudaMemcpy blocked on tid {t.tid} for "
          f"{s.dur / 1e9:.2f} s up to the dump, alert {(a.ts - s.ts) / 1e9:.2f} s after "
          f"its entry: {a.name}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
