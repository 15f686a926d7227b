#!/usr/bin/env python3
"""Checks ntcore's file-sink output against what xfer.py did.

check.py XFER.json EVENTS.jsonl
Exits non-zero with a message naming what differs.
"""
import json
import sys

CHUNK = 8192


def fail(msg):
    sys.exit("net check: FAIL: " + msg)


def main():
    xfer = json.load(open(sys.argv[1]))
    events, metrics = [], {}
    for line in open(sys.argv[2]):
        line = line.strip()
        if not line:
            continue
        o = json.loads(line)
        if o["type"] == "metric":
            key = (o["name"], tuple(sorted(o.get("labels", {}).items())))
            metrics[key] = o  # the last dump wins
        else:
            events.append(o)

    proto, n, port = xfer["proto"], xfer["n"], xfer["port"]
    snd, rcv = xfer["sender"], xfer["receiver"]
    if snd["sent"] != n or rcv["got"] != n:
        fail("the workload itself moved %d/%d bytes, not %d" % (snd["sent"], rcv["got"], n))
    local = "::1" if "--v6" in sys.argv else "127.0.0.1"

    def one(etype, who, lport, rport):
        found = [e for e in events if e["type"] == etype and e["proto"] == proto
                 and e["lport"] == lport and e["rport"] == rport]
        if len(found) != 1:
            fail("%s: expected exactly one %s for %s %s:%d -> :%d, found %d: %s"
                 % (proto, etype, who, local, lport, rport, len(found), found))
        e = found[0]
        if e["pid"] != xfer[who]["pid"]:
            fail("%s %s of the %s: pid %d, expected %d" % (proto, etype, who, e["pid"], xfer[who]["pid"]))
        if e["laddr"] != local:
            fail("%s %s of the %s: laddr %s, expected %s" % (proto, etype, who, e["laddr"], local))
        return e

    # The receiver's UDP socket is unconnected: its peer is the source of
    # the last datagram it received, which is the sender.
    s_lport, r_lport = snd["lport"], rcv["lport"]
    r_rport = s_lport
    so, sc = one("net.open", "sender", s_lport, port), one("net.conn", "sender", s_lport, port)
    ro, rc = one("net.open", "receiver", r_lport, r_rport), one("net.conn", "receiver", r_lport, r_rport)
    for e, who in ((sc, "sender"), (rc, "receiver")):
        if e["raddr"] != local:
            fail("%s's raddr %s, expected %s" % (who, e["raddr"], local))
    for e, who in ((sc, "sender"), (rc, "receiver")):
        if e["closed"] is not True:
            fail("%s net.conn of the %s is not closed: %s" % (proto, who, e))
    if sc["tx_bytes"] != n:
        fail("%s: sender's connection sent %d bytes, expected %d" % (proto, sc["tx_bytes"], n))
    if rc["rx_bytes"] != n:
        fail("%s: receiver's connection received %d bytes, expected %d" % (proto, rc["rx_bytes"], n))
    if sc["rx_bytes"] != snd["got"] or rc["tx_bytes"] != rcv["sent"]:
        fail("%s: reverse direction %d/%d, expected %d/%d" % (proto, sc["rx_bytes"], rc["tx_bytes"], snd["got"], rcv["sent"]))
    if proto == "tcp":
        if so["role"] != "active" or ro["role"] != "passive":
            fail("tcp roles %s/%s, expected active/passive" % (so["role"], ro["role"]))
        if sc["srtt_ns"] <= 0 or rc["srtt_ns"] <= 0:
            fail("tcp srtt not measured: %d / %d" % (sc["srtt_ns"], rc["srtt_ns"]))
        # Every data byte needs at least one segment of at most 64 KiB.
        if sc["tx_packets"] < n // 65536 or rc["rx_packets"] < n // 65536:
            fail("tcp segments %d/%d too few for %d bytes" % (sc["tx_packets"], rc["rx_packets"], n))
    else:
        dgrams = (n + CHUNK - 1) // CHUNK + 1  # + the empty end marker
        if sc["tx_packets"] != dgrams or rc["rx_packets"] != dgrams:
            fail("udp datagrams sent %d / received %d, expected %d" % (sc["tx_packets"], rc["rx_packets"], dgrams))
        if sc["rx_packets"] != dgrams - 1 or rc["tx_packets"] != dgrams - 1:
            fail("udp acks %d/%d, expected %d" % (sc["rx_packets"], rc["tx_packets"], dgrams - 1))

    def metric(name, pid, want):
        hits = [m for (mname, labels), m in metrics.items() if mname == name
                and dict(labels).get("pid") == str(pid) and dict(labels).get("proto") == proto]
        if len(hits) != 1:
            fail("metric %s{pid=%d,proto=%s}: %d series" % (name, pid, proto, len(hits)))
        if hits[0]["value"] != want:
            fail("metric %s{pid=%d,proto=%s} = %s, expected %s" % (name, pid, proto, hits[0]["value"], want))

    metric("ntcore_net_tx_bytes_total", snd["pid"], n)
    metric("ntcore_net_rx_bytes_total", rcv["pid"], n)
    metric("ntcore_net_connections_opened_total", snd["pid"], 1)
    metric("ntcore_net_connections_closed_total", rcv["pid"], 1)
    print("net check: %s%s: %d bytes sender pid %d -> receiver pid %d, one open and one "
          "close per side, metrics match" % (proto, " ipv6" if local == "::1" else "", n,
                                              snd["pid"], rcv["pid"]))


if __name__ == "__main__":
    main()
