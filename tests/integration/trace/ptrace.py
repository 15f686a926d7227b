# SPDX-License-Identifier: MIT
"""Decode the trace sink's output for the tests: a Perfetto protobuf trace
(with python3-protobuf and perfetto_subset.proto, compiled by protoc) or a
JSON trace-event file, into one model:

  tracks    uuid -> Track(uuid, parent, kind, name, pid, tid, unit)
  slices    [Slice(track, ts, dur, name, cat, args, instant, depth,
                   flow_out, flow_in)]  (instants have dur 0, instant True)
  counters  [(track, ts, value)]
  clock     the clock snapshot (perfetto only)

Perfetto slices are rebuilt the way Perfetto's trace processor does: all
events sorted by timestamp (file order breaks ties), per track a stack that
BEGIN pushes and END pops. Anything that does not decode, an END with
nothing open, a name or track that is not defined, or an END that closes
a slice whose own end is elsewhere (improper nesting) raises TraceError.
"""
import collections
import importlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


class TraceError(Exception):
    pass


Track = collections.namedtuple("Track", "uuid parent kind name pid tid unit")
Slice = collections.namedtuple(
    "Slice", "track ts dur name cat args instant depth flow_out flow_in")


def _pb2():
    out = os.environ.get("NT_PROTO_OUT") or tempfile.mkdtemp(prefix="nt-pb2-")
    mod = os.path.join(out, "perfetto_subset_pb2.py")
    if not os.path.exists(mod):
        subprocess.run(["protoc", "--proto_path=" + HERE, "--python_out=" + out,
                        os.path.join(HERE, "perfetto_subset.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("perfetto_subset_pb2")


class Model:
    def __init__(self):
        self.tracks = {}
        self.slices = []
        self.counters = []
        self.clock = None
        self.packets = 0

    # -- queries -----------------------------------------------------
    def track_named(self, name, kind=None):
        t = [t for t in self.tracks.values() if t.name == name and
             (kind is None or t.kind == kind)]
        if len(t) != 1:
            raise TraceError(f"{len(t)} tracks named {name!r}")
        return t[0]

    def thread(self, pid, tid):
        t = [t for t in self.tracks.values() if t.kind == "thread" and
             t.pid == pid and t.tid == tid]
        if len(t) != 1:
            raise TraceError(f"{len(t)} thread tracks for {pid}/{tid}")
        return t[0]

    def on(self, track, instant=None):
        return [s for s in self.slices if s.track == track.uuid and
                (instant is None or s.instant == instant)]

    def children(self, track):
        return [t for t in self.tracks.values() if t.parent == track.uuid]


def _annotation_value(a, strings):
    if a.HasField("string_value_iid"):
        return strings[a.string_value_iid].decode()
    for f in ("string_value", "uint_value", "int_value", "double_value", "bool_value"):
        if a.HasField(f):
            return getattr(a, f)
    return None


def _track(m, td):
    if td.uuid in m.tracks:
        old = m.tracks[td.uuid]
        if td.HasField("process") and old.kind == "process":  # renamed
            m.tracks[td.uuid] = old._replace(name=td.process.process_name)
            return
        raise TraceError(f"track {td.uuid} described twice")
    if td.HasField("process"):
        t = Track(td.uuid, td.parent_uuid, "process", td.process.process_name,
                  td.process.pid, 0, None)
    elif td.HasField("thread"):
        t = Track(td.uuid, td.parent_uuid, "thread", td.thread.thread_name,
                  td.thread.pid, td.thread.tid, None)
    elif td.HasField("counter"):
        unit = td.counter.unit_name or type(td.counter).Unit.Name(td.counter.unit)
        t = Track(td.uuid, td.parent_uuid, "counter", td.name, None, None, unit)
    else:
        t = Track(td.uuid, td.parent_uuid, "named", td.name, None, None, None)
    if t.parent and t.parent not in m.tracks:
        raise TraceError(f"track {t.name!r}: parent {t.parent} not described before")
    m.tracks[t.uuid] = t


class _Interned:
    def __init__(self):
        self.clear()

    def clear(self):
        self.names, self.cats, self.args, self.strings = {}, {}, {}, {}

    def add(self, idata):
        for tab, entries in ((self.names, idata.event_names),
                             (self.cats, idata.event_categories),
                             (self.args, idata.debug_annotation_names)):
            for e in entries:
                tab[e.iid] = e.name
        for e in idata.debug_annotation_string_values:
            self.strings[e.iid] = e.str


def _event(m, pb, p, order, it, raw):
    te = p.track_event
    if te.track_uuid not in m.tracks:
        raise TraceError(f"event on undescribed track {te.track_uuid}")
    if p.timestamp_clock_id != 3:
        raise TraceError(f"timestamp clock {p.timestamp_clock_id}, want 3 (MONOTONIC)")
    T = pb.TrackEvent
    if te.type == T.TYPE_COUNTER:
        m.counters.append((te.track_uuid, p.timestamp, te.double_counter_value))
        return
    if te.type == T.TYPE_SLICE_END:
        raw.append((p.timestamp, order, "E", te.track_uuid, None))
        return
    try:
        name = it.names[te.name_iid] if te.HasField("name_iid") else te.name
        cat = ",".join(it.cats[c] for c in te.category_iids)
        args = {}
        for a in te.debug_annotations:
            key = it.args[a.name_iid] if a.HasField("name_iid") else a.name
            args[key] = _annotation_value(a, it.strings)
    except KeyError as e:
        raise TraceError(f"interned id {e} used before it was defined")
    kind = "I" if te.type == T.TYPE_INSTANT else "B"
    raw.append((p.timestamp, order, kind, te.track_uuid,
                dict(name=name, cat=cat, args=args,
                     flow_out=list(te.flow_ids), flow_in=list(te.terminating_flow_ids))))


def _build_slices(m, raw):
    """Sort like the trace processor and pair BEGIN/END per track."""
    intended = {}  # order of a BEGIN -> ts of the END written right after
    by_order = sorted(raw, key=lambda r: r[1])
    for a, b in zip(by_order, by_order[1:]):
        if a[2] == "B" and b[2] == "E" and a[3] == b[3]:
            intended[a[1]] = b[0]
    stacks = collections.defaultdict(list)
    for ts, order, kind, track, d in sorted(raw, key=lambda r: (r[0], r[1])):
        st = stacks[track]
        if kind == "I":
            m.slices.append(Slice(track, ts, 0, d["name"], d["cat"], d["args"], True,
                                  len(st), d["flow_out"], d["flow_in"]))
        elif kind == "B":
            st.append((ts, order, d))
        else:
            if not st:
                raise TraceError(f"END at {ts} on track {track} with nothing open")
            bts, border, d = st.pop()
            # the END must end the slice it was written for, or one of
            # the very same span (a call and its error event)
            if intended.get(border) != ts:
                raise TraceError(f"improper nesting on track {m.tracks[track].name!r}: "
                                 f"END at {ts} closes {d['name']!r} begun at {bts}")
            m.slices.append(Slice(track, bts, ts - bts, d["name"], d["cat"], d["args"],
                                  False, len(st), d["flow_out"], d["flow_in"]))
    for track, st in stacks.items():
        if st:
            raise TraceError(f"{len(st)} slices never ended on track {track}")


def load_perfetto(path):
    pb = _pb2()
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    m, it, raw = Model(), _Interned(), []
    for order, p in enumerate(trace.packet):
        m.packets += 1
        if p.trusted_packet_sequence_id != 1:
            raise TraceError(f"packet {order}: sequence {p.trusted_packet_sequence_id}")
        if order == 0 and not (p.sequence_flags & 1):
            raise TraceError("the first packet does not clear the incremental state")
        if p.sequence_flags & 1:
            it.clear()
        if p.HasField("interned_data"):
            it.add(p.interned_data)
        if p.HasField("clock_snapshot"):
            m.clock = {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks}
            m.clock["primary"] = p.clock_snapshot.primary_trace_clock
        elif p.HasField("track_descriptor"):
            _track(m, p.track_descriptor)
        elif p.HasField("track_event"):
            if not p.sequence_flags & 2:
                raise TraceError(f"packet {order}: interning without SEQ_NEEDS_INCREMENTAL_STATE")
            _event(m, pb, p, order, it, raw)
    _build_slices(m, raw)
    return m


JPID_ALERTS, JPID_GPU, JTID_CHILD = 1999999999, 2000000000, 1000000000


def _json_tracks(doc):
    """Tracks like the Perfetto ones from the JSON ids the sink gives:
    (pid, 0) a process, a GPU (pid >= JPID_GPU) or the Alerts track;
    (pid, tid) a thread, a stream (under its GPU) or, tid >= JTID_CHILD,
    a child track "<thread name> <what>" under that thread."""
    names = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M":
            names[(e["pid"], e["tid"] if e["name"] == "thread_name" else 0)] = e["args"]["name"]
    keys = {(e["pid"], e.get("tid", 0)) for e in doc["traceEvents"]
            if e["ph"] in ("X", "i", "M")} | {(e["pid"], 0) for e in doc["traceEvents"]}
    tracks = {}
    for pid, tid in sorted(keys, key=lambda k: (k[0], k[1] >= JTID_CHILD, k[1])):
        name = names.get((pid, tid), "")
        if tid == 0:
            kind = "named" if pid >= JPID_ALERTS else "process"
            tracks[(pid, 0)] = Track((pid, 0), 0, kind, name,
                                     pid if kind == "process" else None, 0, None)
        elif pid >= JPID_GPU:
            # a stream, or a child track "<stream name> <what>" of one
            owner = [t for t in tracks.values() if t.parent == (pid, 0) and
                     tid >= JTID_CHILD and name.startswith(t.name + " ")]
            tracks[(pid, tid)] = Track((pid, tid), owner[0].uuid if owner else (pid, 0),
                                       "named", name, None, None, None)
        elif tid >= JTID_CHILD:
            owner = [t for t in tracks.values() if t.kind == "thread" and t.pid == pid
                     and name.startswith(t.name + " ")]
            tracks[(pid, tid)] = Track((pid, tid), owner[0].uuid if owner else (pid, 0),
                                       "named", name, None, None, None)
        else:
            tracks[(pid, tid)] = Track((pid, tid), 0, "thread", name, pid, tid, None)
    return tracks


def load_json(path):
    """The JSON variant into the same model as load_perfetto's."""
    with open(path) as f:
        doc = json.load(f)
    m = Model()
    m.tracks = _json_tracks(doc)
    flows = {}
    for e in doc["traceEvents"]:
        if e["ph"] in ("s", "f"):
            flows.setdefault((e["pid"], e["tid"], round(e["ts"] * 1000)), []).append(e)
    counters = {}
    for e in doc["traceEvents"]:
        key, ts = (e["pid"], e.get("tid", 0)), round(e.get("ts", 0) * 1000)
        if e["ph"] == "C":
            if e["name"] not in counters:
                unit = "UNIT_SIZE_BYTES" if e["name"].split("{")[0].endswith("_bytes") else ""
                counters[e["name"]] = Track(("C", e["name"]), (e["pid"], 0) if e["pid"] else 0,
                                            "counter", e["name"], None, None, unit)
                m.tracks[counters[e["name"]].uuid] = counters[e["name"]]
            m.counters.append((counters[e["name"]].uuid, ts, e["args"]["value"]))
        elif e["ph"] in ("X", "i"):
            fl = flows.get((e["pid"], e.get("tid", 0), ts), [])
            # a flow's source is written as a zero-length "X" (JSON flows
            # bind to slices); it stands for an instant
            instant = e["ph"] == "i" or (e.get("dur", 0) == 0 and
                                         any(f["ph"] == "s" for f in fl))
            m.slices.append(Slice(key, ts, round(e.get("dur", 0) * 1000), e["name"],
                                  e.get("cat", ""), e.get("args", {}), instant, None,
                                  [f["id"] for f in fl if f["ph"] == "s"],
                                  [f["id"] for f in fl if f["ph"] == "f"]))
    return m, doc


def flows(m):
    """id -> (source slice, destination slice), checking each has both."""
    src, dst = {}, {}
    for s in m.slices:
        for f in s.flow_out:
            if f in src:
                raise TraceError(f"flow {f} starts twice")
            src[f] = s
        for f in s.flow_in:
            if f in dst:
                raise TraceError(f"flow {f} ends twice")
            dst[f] = s
    if set(src) != set(dst):
        raise TraceError(f"flows without both ends: {sorted(set(src) ^ set(dst))[:5]}")
    return {f: (src[f], dst[f]) for f in src}
