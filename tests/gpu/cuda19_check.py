#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks of issue 19's GPU run (tests/gpu/cuda19.sh), on ntcore's file-sink
JSON Lines and what cuda19_workload.py wrote. Standard library only (it is
dry-run on the fixtures' output where no PyTorch is installed).

  cuda19_check.py graphs NT.jsonl WL.json      per window: ntcore's launch counts
                                               (metric snapshots in the quiet gaps)
                                               equal the profiler's, per kernel
  cuda19_check.py alerts NT.jsonl WL.json      expandable segments: leak alert
                                               within 5 s, OOM live bytes within 1 %
                                               of memory_reserved(); the leak, OOM,
                                               error and hang alerts name the
                                               planted Python function
  cuda19_check.py attach NT.jsonl PID OUT.json [BOTH.jsonl]
                                               share of launches with a name after
                                               an attach (>= 95 %) and by which
                                               method; reads unnamed handles'
                                               memory; BOTH: a second attach with
                                               launch_layer = "both": its share,
                                               and the first run's names found
                                               by it too
  cuda19_check.py stacks NT.jsonl              stacks are root first, the CUDA
                                               function last

Each prints "PASS name: ..." or "FAIL name: ..." lines and exits 1 on a FAIL.
"""
import json
import re
import sys
from collections import Counter, defaultdict


def load(path):
    out = []
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a kill: skip
    return out


def verdict(ok, name, msg):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {msg}")
    return ok


def norm(name):
    return re.sub(r"\s+", "", name)


def snapshots(ev, pid, metric="ntcore_cuda_launches_total"):
    """[(ts, Counter(kernel -> value))] of one process, oldest first."""
    snaps = defaultdict(Counter)
    for e in ev:
        if e.get("type") == "metric" and e.get("name") == metric and \
                e.get("labels", {}).get("pid") == str(pid):
            snaps[e["ts"]][e["labels"]["kernel"]] = e["value"]
    return sorted(snaps.items())


def at(snaps, t):
    """The newest snapshot taken before t (an empty one when none)."""
    best = Counter()
    for ts, v in snaps:
        if ts < t:
            best = v
    return best


def check_graphs(nt_path, wl_path):
    ev, wl = load(nt_path), json.load(open(wl_path))
    snaps = snapshots(ev, wl["pid"])
    ok = True
    for name, err in wl.get("errors", {}).items():
        ok &= verdict(False, f"graphs.{name}", f"workload part failed: {err}")
    wins = wl["windows"]
    if not wins:
        return verdict(False, "graphs", "no window measured")
    graph_launches = sum(1 for e in ev if e.get("type") == "cuda.graph_launch")
    for i, w in enumerate(wins):
        # the window is followed by a quiet gap (QUIET_S, 1.5 s) in which the
        # counters stand still: the last snapshot in its first second holds
        # the window's launches and nothing of what comes after (the next
        # part's compile and warm-up)
        nxt = wins[i + 1]["t0"] if i + 1 < len(wins) else float("inf")
        before, after = at(snaps, w["t0"]), at(snaps, min(nxt, w["t1"] + 1_000_000_000))
        got = Counter({k: after[k] - before[k] for k in after if after[k] - before[k] > 0})
        want = Counter(w["kernels"])
        same = Counter({norm(k): v for k, v in got.items()}) == \
            Counter({norm(k): v for k, v in want.items()})
        msg = (f"profiler {sum(want.values())} launches of {len(want)} kernels, "
               f"ntcore {sum(got.values())} of {len(got)}")
        if not same:
            keys = sorted(set(map(norm, want)) | set(map(norm, got)))
            gn = Counter({norm(k): v for k, v in got.items()})
            wn = Counter({norm(k): v for k, v in want.items()})
            diff = [f"{k[:90]}: profiler {wn[k]} ntcore {gn[k]}" for k in keys if gn[k] != wn[k]]
            msg += "; differ: " + " | ".join(diff[:8])
        ok &= verdict(same and sum(want.values()) > 0, f"graphs.{w['name']}", msg)
    print(f"     (cuda.graph_launch events in the run: {graph_launches})")
    return ok


def alerts_of(ev, typ):
    return [e for e in ev if e.get("type") == typ]


def names_fn(alert, fn):
    blob = alert.get("message", "") + json.dumps(alert.get("evidence", ""))
    # the python probe's frame: "function (file:line)"
    return re.search(re.escape(fn) + r" \([^)]*:\d+\)", blob) is not None


def evidence(alert):
    ev = alert.get("evidence", {})
    if isinstance(ev, str):
        try:
            ev = json.loads(ev)
        except ValueError:
            ev = {}
    return ev if isinstance(ev, dict) else {}


def check_alerts(nt_path, wl_path):
    ev, wl = load(nt_path), json.load(open(wl_path))
    ok = True
    leak = [a for a in alerts_of(ev, "alert.cuda_memleak") if a.get("ts", 0) >= wl["leak_start_ns"]]
    if leak:
        dt = (leak[0]["ts"] - wl["leak_start_ns"]) / 1e9
        ok &= verdict(dt <= 5.0, "vmm.leak_within_5s",
                      f"first leak alert {dt:.2f} s after the list began growing")
    else:
        ok &= verdict(False, "vmm.leak_within_5s", "no leak alert")
    maps = sum(1 for e in ev if e.get("type") == "cuda.alloc" and e.get("api_name") == "cuMemMap")
    unmaps = sum(1 for e in ev if e.get("type") == "cuda.free" and e.get("api_name") == "cuMemUnmap")
    print(f"     cuMemMap allocations {maps}, cuMemUnmap frees {unmaps}")
    oom = [a for a in alerts_of(ev, "alert.cuda_oom")]
    reserved = wl.get("reserved_before_oom")
    if oom and reserved:
        live = evidence(oom[0]).get("live_bytes", 0)
        rel = abs(live - reserved) / reserved
        ok &= verdict(rel <= 0.01, "vmm.oom_live_bytes",
                      f"OOM alert live {live} B, memory_reserved() {reserved} B ({100 * rel:.2f} %)")
    else:
        ok &= verdict(False, "vmm.oom_live_bytes",
                      f"{len(oom)} OOM alerts, reserved before the OOM {reserved}")
    for typ, fn in (("alert.cuda_memleak", "leaky_loop"), ("alert.cuda_oom", "ask_too_much"),
                    ("alert.cuda_errors", "bad_device"), ("alert.cuda_hang", "wait_gpu")):
        al = alerts_of(ev, typ)
        hit = [a for a in al if names_fn(a, fn)]
        ex = (hit or al or [{}])[0].get("message", "")[:220]
        ok &= verdict(bool(hit), f"python.{typ.split('.')[1]}",
                      f"{len(hit)} of {len(al)} alerts name {fn}(): {ex}")
    return ok


def last_by_label(ev, pid, metric, label):
    """Counter(label value -> value) of the newest snapshot of one process
    (counters start at the attach: the newest is the whole window)."""
    snaps = defaultdict(Counter)
    for e in ev:
        if e.get("type") == "metric" and e.get("name") == metric and \
                e.get("labels", {}).get("pid") == str(pid):
            snaps[e["ts"]][e["labels"].get(label, "")] = e["value"]
    return sorted(snaps.items())[-1][1] if snaps else Counter()


def attach_share(nt_path, pid, tag):
    """(ok, {kernel: launches}) of one attach run; prints its verdict and
    which naming method named how many launches."""
    ev = load(nt_path)
    last = last_by_label(ev, pid, "ntcore_cuda_launches_total", "kernel")
    meth = last_by_label(ev, pid, "ntcore_cuda_launches_named_total", "method")
    total = sum(last.values())
    unnamed = {k: v for k, v in last.items() if k.startswith("0x")}
    named = total - sum(unnamed.values())
    share = named / total if total else 0.0
    ok = verdict(total > 0 and share >= 0.95, tag,
                 f"{int(named)} of {int(total)} launches in the window named "
                 f"({100 * share:.1f} %), {len(unnamed)} unnamed handles; by method "
                 + ", ".join(f"{m} {int(v)}" for m, v in sorted(meth.items())))
    return ok, last


def check_attach(nt_path, pid, out_path, both_path=None):
    ok, last = attach_share(nt_path, pid, "attach.named")
    unnamed = {k: v for k, v in last.items() if k.startswith("0x")}
    probe_handles(pid, sorted(unnamed, key=lambda k: -unnamed[k])[:8], out_path)
    if both_path:
        ok_b, last_b = attach_share(both_path, pid, "attach.named_both")
        # the default run's names (guessed or learned offset) against the
        # names the second run found with host stubs and the join
        names_b = {k for k in last_b if not k.startswith("0x")}
        named_a = {k: v for k, v in last.items() if not k.startswith("0x")}
        agree = sum(v for k, v in named_a.items() if k in names_b)
        tot_a = sum(named_a.values())
        odd = sorted((k for k in named_a if k not in names_b),
                     key=lambda k: -named_a[k])[:3]
        ok_c = verdict(tot_a > 0 and agree >= 0.95 * tot_a, "attach.names_agree",
                       f"{int(agree)} of {int(tot_a)} named launches of the default "
                       f"run carry a name the launch_layer=both run also found; "
                       f"not found: {[k[:80] for k in odd]}")
        ok = ok and ok_b and ok_c
    return ok


def read_mem(pid, addr, n):
    try:
        with open(f"/proc/{pid}/mem", "rb") as fh:
            fh.seek(addr)
            return fh.read(n)
    except (OSError, ValueError, OverflowError):
        return b""


def cstring(b):
    s = b.split(b"\0", 1)[0]
    if len(s) >= 4 and all(32 < c < 127 for c in s):
        return s.decode()
    return None


def probe_handles(pid, handles, out_path):
    """For the next step of issue 19's attach names: what an unnamed driver
    handle points at (strings reachable in one or two pointer hops)."""
    found = {}
    for h in handles:
        base = int(h, 16)
        blob = read_mem(pid, base, 512)
        hits = []
        for off in range(0, len(blob) - 7, 8):
            p = int.from_bytes(blob[off:off + 8], "little")
            if p < 0x10000 or p > 0x7fffffffffff:
                continue
            s = cstring(read_mem(pid, p, 256))
            if s:
                hits.append({"off": off, "str": s[:200]})
                continue
            inner = read_mem(pid, p, 256)
            for off2 in range(0, len(inner) - 7, 8):
                q = int.from_bytes(inner[off2:off2 + 8], "little")
                if 0x10000 <= q <= 0x7fffffffffff:
                    s2 = cstring(read_mem(pid, q, 256))
                    if s2:
                        hits.append({"off": off, "off2": off2, "str": s2[:200]})
        found[h] = {"readable": len(blob), "strings": hits[:40]}
    with open(out_path, "w") as fh:
        json.dump(found, fh, indent=1)
    print(f"     unnamed handles probed: {len(found)} -> {out_path}")


def check_stacks(nt_path):
    ev = load(nt_path)
    st = [e for e in ev if e.get("type") == "cuda.alloc" and e.get("stack")]
    good = [e for e in st if e["stack"].split(";")[-1] == e.get("api_name")
            and len(e["stack"].split(";")) >= 2]
    ex = st[0]["stack"][-300:] if st else ""
    return verdict(bool(st) and len(good) >= 0.95 * len(st), "stacks.root_first",
                   f"{len(good)} of {len(st)} allocation stacks end with their CUDA "
                   f"function (root first); e.g. ...{ex}")


def main():
    mode = sys.argv[1]
    if mode == "graphs":
        ok = check_graphs(sys.argv[2], sys.argv[3])
    elif mode == "alerts":
        ok = check_alerts(sys.argv[2], sys.argv[3])
    elif mode == "attach":
        ok = check_attach(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                          sys.argv[5] if len(sys.argv) > 5 else None)
    elif mode == "stacks":
        ok = check_stacks(sys.argv[2])
    else:
        sys.exit(f"unknown mode {mode}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
