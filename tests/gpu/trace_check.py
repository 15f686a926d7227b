# SPDX-License-Identifier: MIT
"""Check the trace sink's traces of a real PyTorch run (tests/gpu/trace.sh).
Standard library only (the GPU machine's Python may lack protobuf): a small
protobuf wire reader for the fields the sink writes (field numbers of
Perfetto's published protos, as in tests/integration/trace/perfetto_subset.proto).

  trace_check.py TRACE.pftrace TRACE.json EVENTS.jsonl RUN_SECONDS OUT.json

Checks: per kernel name, the launch instants in the Perfetto trace and in
the JSON trace equal the cuda probe's ntcore_cuda_launches_total; when the
trace holds device slices (cuda.kernel_exec from the CUPTI plugin), their
count per kernel name equals the launch count too, and every joined one has
its flow. Prints bytes per second of run for both formats."""
import collections
import json
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field, wire type, value) of one message; LEN values as bytes."""
    i, n = 0, len(b)
    while i < n:
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif w == 2:
            ln, i = varint(b, i)
            v, i = b[i:i + ln], i + ln
        elif w == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {w}")
        yield f, w, v


def interned(idata, tabs):
    for f, _, v in fields(idata):
        if f in (1, 2, 3, 29):  # categories, event names, arg names, arg strings
            d = dict((ff, vv) for ff, _, vv in fields(v))
            tabs[f][d[1]] = d[2].decode("utf-8", "replace")


def annotation(a, tabs):
    name = val = None
    for f, _, v in fields(a):
        if f == 1:
            name = tabs[3].get(v)
        elif f == 10:
            name = v.decode()
        elif f == 6:
            val = v.decode("utf-8", "replace")
        elif f == 17:
            val = tabs[29].get(v)
        elif f == 4:  # int64: two's complement in the varint
            val = v - (1 << 64) if v >= 1 << 63 else v
        elif f in (2, 3):
            val = v
    return name, val


def load_perfetto(path):
    """Per event: (type, track, name, args, flows out, flows in)."""
    data = open(path, "rb").read()
    tabs = {1: {}, 2: {}, 3: {}, 29: {}}
    tracks, events = {}, []
    for f, _, pkt in fields(data):
        if f != 1:
            continue
        p = collections.defaultdict(list)
        for ff, _, v in fields(pkt):
            p[ff].append(v)
        if p.get(13, [0])[0] & 1:
            tabs = {1: {}, 2: {}, 3: {}, 29: {}}
        for idata in p.get(12, []):
            interned(idata, tabs)
        for td in p.get(60, []):
            d = collections.defaultdict(list)
            for ff, _, v in fields(td):
                d[ff].append(v)
            tracks[d[1][0]] = d
        for te in p.get(11, []):
            d = collections.defaultdict(list)
            for ff, _, v in fields(te):
                d[ff].append(v)
            name = tabs[2].get(d[10][0]) if 10 in d else (d[23][0].decode() if 23 in d else "")
            args = dict(annotation(a, tabs) for a in d.get(4, []))
            events.append((d.get(9, [0])[0], d.get(11, [0])[0], name, args,
                           d.get(47, []), d.get(48, [])))
    return tracks, events


def main(pf, js, jsonl, secs, out):
    res, errs = {}, []
    launches = collections.Counter()
    for line in open(jsonl):
        e = json.loads(line)
        if e.get("type") == "metric" and e["name"] == "ntcore_cuda_launches_total":
            launches[e["labels"]["kernel"]] = int(e["value"])  # the last snapshot wins
    named = {k: v for k, v in launches.items() if not k.startswith("0x")}
    tracks, events = load_perfetto(pf)
    inst = collections.Counter(a.get("kernel") for t, _, n, a, _, _ in events
                               if t == 3 and "Launch" in n and a.get("kernel"))
    dev = collections.Counter(n for t, _, n, a, _, _ in events
                              if t == 1 and "correlation" in a and "launch_ts_ns" in a
                              and "grid_x" in a)
    joined_flows = sum(1 for t, _, n, a, _, fin in events if t == 1 and fin)
    joined = sum(1 for t, _, n, a, _, fin in events if t == 1 and "grid_x" in a
                 and a.get("launch_ts_ns"))
    if dev and sum(1 for t, _, n, a, _, fin in events
                   if t == 1 and "grid_x" in a and a.get("launch_ts_ns") and fin) != joined:
        errs.append(f"joined kernels without a flow: {joined} joined")
    doc = json.load(open(js))
    jinst = collections.Counter(e["args"].get("kernel") for e in doc["traceEvents"]
                                if e["ph"] == "i" and "Launch" in e["name"] and
                                e.get("args", {}).get("kernel"))
    for what, got in (("perfetto launch instants", inst), ("json launch instants", jinst)):
        diff = {k: (got.get(k, 0), v) for k, v in named.items() if got.get(k, 0) != v}
        if diff:
            errs.append(f"{what} differ from launch counts for {len(diff)} kernels: "
                        f"{list(diff.items())[:5]}")
    if dev:
        diff = {k: (dev.get(k, 0), v) for k, v in named.items() if dev.get(k, 0) != v}
        if diff:
            errs.append(f"device slices differ from launch counts for {len(diff)} kernels: "
                        f"{list(diff.items())[:5]}")
    import os
    res = {"kernels": len(named), "launches": sum(named.values()),
           "perfetto_launch_instants": sum(inst.values()), "device_slices": sum(dev.values()),
           "flows_into_device_slices": joined_flows, "joined_kernels": joined,
           "tracks": len(tracks),
           "perfetto_bytes": os.path.getsize(pf), "json_bytes": os.path.getsize(js),
           "run_s": secs,
           "perfetto_bytes_per_s": os.path.getsize(pf) / secs,
           "json_bytes_per_s": os.path.getsize(js) / secs,
           "errors": errs}
    json.dump(res, open(out, "w"), indent=1)
    print(f"{res['kernels']} kernels, {res['launches']} launches; Perfetto launch instants "
          f"{res['perfetto_launch_instants']}, device slices {res['device_slices']} "
          f"({joined_flows} with a flow); {len(tracks)} tracks")
    print(f"size per second of run ({secs:.1f} s): Perfetto {res['perfetto_bytes_per_s'] / 1e6:.2f} MB/s "
          f"({res['perfetto_bytes'] / 1e6:.1f} MB), JSON {res['json_bytes_per_s'] / 1e6:.2f} MB/s "
          f"({res['json_bytes'] / 1e6:.1f} MB)")
    if not dev:
        print("no device slices in the trace (no CUPTI plugin loaded): launches checked only")
    print("\n".join(errs) if errs else "PASS")
    return 1 if errs or not named else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]))
