#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Small helpers for the Prometheus sink's integration tests and benchmark.

Standard library only (no curl, no prometheus_client), so a bare CI machine
with python3 runs them. Each subcommand exits non-zero with a message on
stderr when what it checks does not hold.
"""
import argparse
import json
import math
import re
import socket
import sys
import time
import urllib.parse
import urllib.request

SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
UNESC = re.compile(r"\\(.)", re.S)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def die(msg):
    print("promtest: " + msg, file=sys.stderr)
    sys.exit(1)


def free_port(_):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


def wait_log(a):
    """Wait until a line of FILE matches REGEX; print group 1 (or the line)."""
    rx = re.compile(a.regex)
    end = time.time() + a.timeout
    while time.time() < end:
        try:
            with open(a.file, errors="replace") as f:
                for line in f:
                    m = rx.search(line)
                    if m:
                        print(m.group(1) if m.groups() else line.strip())
                        return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    die("no line matching /%s/ in %s after %ss" % (a.regex, a.file, a.timeout))


def get(a):
    req = urllib.request.Request(a.url)
    if a.accept:
        req.add_header("Accept", a.accept)
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=a.timeout) as r:
            body = r.read()
            ctype = r.headers.get("Content-Type", "")
    except Exception as e:  # noqa: BLE001 - report any failure the same way
        die("GET %s: %s" % (a.url, e))
    dt = time.perf_counter() - t0
    if a.out:
        with open(a.out, "wb") as f:
            f.write(body)
    if a.print_type:
        print(ctype)
    if a.print_time:
        print("%.6f %d" % (dt, len(body)))


def parse(path, text=None):
    """[(name, {labels}, value)] from an exposition file (text or OM)."""
    out = []
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    for n, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            die("%s:%d: not a sample line: %r" % (path, n, line))
        labels = {}
        if m.group(3):
            for k, v in LABEL.findall(m.group(3)):
                labels[k] = UNESC.sub(
                    lambda e: "\n" if e.group(1) == "n" else e.group(1), v)
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def hist_consistent(a):
    """Every histogram series: buckets non-decreasing, +Inf == _count, and
    (with --sum-rule B,K,C0) _sum == B + K * (_count - C0). With --repeat N
    the file argument is a URL, scraped and checked N times."""
    if not a.repeat:
        print(check_hist(a, parse(a.file)))
        return
    url, n = a.file, 0
    for i in range(a.repeat):
        with urllib.request.urlopen(url, timeout=30) as r:
            text = r.read().decode("utf-8")
        a.file = "%s (scrape %d)" % (url, i + 1)
        n = check_hist(a, parse(a.file, text))
    print(n)


def check_hist(a, samples):
    hist = {}
    for name, labels, v in samples:
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf):
                base = name[: -len(suf)]
                key = tuple(sorted((k, x) for k, x in labels.items()
                                   if k != "le"))
                h = hist.setdefault((base, key), {"b": []})
                if suf == "_bucket":
                    le = labels["le"]
                    h["b"].append((math.inf if le == "+Inf" else float(le), v))
                else:
                    h[suf] = v
    n = 0
    for (base, key), h in hist.items():
        if not h["b"]:
            continue
        if a.prefix and not base.startswith(a.prefix):
            continue
        n += 1
        b = h["b"]
        if [x[0] for x in b] != sorted(x[0] for x in b) or b[-1][0] != math.inf:
            die("%s%s: le not ascending to +Inf: %s" % (base, key, b))
        for i in range(1, len(b)):
            if b[i][1] < b[i - 1][1]:
                die("%s%s: buckets not cumulative: %s" % (base, key, b))
        if h.get("_count") != b[-1][1]:
            die("%s%s: _count %s != +Inf bucket %s" % (base, key,
                                                        h.get("_count"), b[-1][1]))
        if a.sum_rule:
            s0, k, c0 = (float(x) for x in a.sum_rule.split(","))
            want = s0 + k * (h["_count"] - c0)
            if abs(h["_sum"] - want) > 1e-9 * max(1, abs(want)):
                die("%s%s: torn snapshot: _sum %s but _count %s implies %s"
                    % (base, key, h["_sum"], h["_count"], want))
    if n < a.min:
        die("only %d histogram series%s (want >= %d)" %
            (n, " under " + a.prefix if a.prefix else "", a.min))
    return n


def count(a):
    """Number of samples named NAME (optionally with label K=V)."""
    n = 0
    for name, labels, _ in parse(a.file):
        if name == a.name and all(labels.get(k) == v for k, v in
                                  (x.split("=", 1) for x in a.label)):
            n += 1
    print(n)


def value(a):
    """Value of the one sample NAME with labels K=V (exact match)."""
    want = dict(x.split("=", 1) for x in a.label)
    hits = [v for name, labels, v in parse(a.file)
            if name == a.name and labels == want]
    if len(hits) != 1:
        die("%d samples %s%s in %s" % (len(hits), a.name, want, a.file))
    v = hits[0]
    print(int(v) if v == int(v) else v)


def query(a):
    """Instant query through Prometheus's HTTP API; prints the value of a
    single-result vector (retries until --timeout while empty)."""
    url = a.prom.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode(
        {"query": a.expr})
    end = time.time() + a.timeout
    last = None
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                doc = json.load(r)
            last = doc
            res = doc["data"]["result"]
            if doc["status"] == "success" and len(res) == 1:
                v = float(res[0]["value"][1])
                if a.expect is None or v == a.expect:
                    print(int(v) if v == int(v) else v)
                    return
        except Exception as e:  # noqa: BLE001
            last = str(e)
        if time.time() > end:
            die("query %r: no single result%s after %ss; last answer: %s"
                % (a.expr, "" if a.expect is None else " equal to %s" % a.expect,
                   a.timeout, json.dumps(last)[:800] if not isinstance(last, str)
                   else last))
        time.sleep(0.25)


def _http_get(sock, host, path, accept):
    """One GET on a keep-alive socket; returns the body (identity encoding,
    Content-Length or chunked)."""
    sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: %s\r\n"
                  "Accept-Encoding: identity\r\n\r\n" % (path, host, accept))
                 .encode())
    buf = bytearray()
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            die("connection closed in the headers")
        buf += chunk
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status != b"200":
        die("HTTP %s" % status.decode())
    hdrs = {k.strip().lower(): v.strip() for k, _, v in
            (l.partition(b":") for l in head.split(b"\r\n")[1:])}
    body = bytearray(rest)
    if b"content-length" in hdrs:
        n = int(hdrs[b"content-length"])
        while len(body) < n:
            chunk = sock.recv(1 << 20)
            if not chunk:
                die("connection closed in the body")
            body += chunk
        return bytes(body[:n])
    # chunked
    out = bytearray()
    while True:
        while b"\r\n" not in body:
            body += sock.recv(1 << 20)
        line, _, body = bytes(body).partition(b"\r\n")
        size = int(line.split(b";")[0], 16)
        body = bytearray(body)
        while len(body) < size + 2:
            body += sock.recv(1 << 20)
        out += body[:size]
        body = body[size + 2:]
        if size == 0:
            return bytes(out)


def bench(a):
    """Scrape URL --reps times over one keep-alive connection after
    --warmup scrapes; print: samples bytes median_ms p90_ms min_ms."""
    u = urllib.parse.urlsplit(a.url)
    sock = socket.create_connection((u.hostname, u.port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    accept = "text/plain;version=0.0.4"
    body = b""
    for _ in range(a.warmup):
        body = _http_get(sock, u.netloc, u.path, accept)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        body = _http_get(sock, u.netloc, u.path, accept)
        times.append(time.perf_counter() - t0)
    sock.close()
    times.sort()
    samples = sum(1 for l in body.split(b"\n") if l and not l.startswith(b"#"))
    med = times[len(times) // 2]
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    print("%d %d %.4f %.4f %.4f" % (samples, len(body), med * 1e3, p90 * 1e3,
                                    times[0] * 1e3))


def hold_port(a):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", a.port))
    s.listen(4)
    print("listening", flush=True)
    time.sleep(a.seconds)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("free-port").set_defaults(fn=free_port)
    s = sub.add_parser("wait-log")
    s.add_argument("file")
    s.add_argument("regex")
    s.add_argument("--timeout", type=float, default=15)
    s.set_defaults(fn=wait_log)
    s = sub.add_parser("get")
    s.add_argument("url")
    s.add_argument("--accept")
    s.add_argument("--out")
    s.add_argument("--timeout", type=float, default=30)
    s.add_argument("--print-type", action="store_true")
    s.add_argument("--print-time", action="store_true")
    s.set_defaults(fn=get)
    s = sub.add_parser("hist-consistent")
    s.add_argument("file")
    s.add_argument("--prefix")
    s.add_argument("--sum-rule")
    s.add_argument("--min", type=int, default=1)
    s.add_argument("--repeat", type=int, default=0,
                   help="FILE is a URL: scrape and check it this many times")
    s.set_defaults(fn=hist_consistent)
    for cmd, fn in (("count", count), ("value", value)):
        s = sub.add_parser(cmd)
        s.add_argument("file")
        s.add_argument("name")
        s.add_argument("label", nargs="*")
        s.set_defaults(fn=fn)
    s = sub.add_parser("query")
    s.add_argument("prom")
    s.add_argument("expr")
    s.add_argument("--expect", type=float)
    s.add_argument("--timeout", type=float, default=20)
    s.set_defaults(fn=query)
    s = sub.add_parser("bench")
    s.add_argument("url")
    s.add_argument("--reps", type=int, default=20)
    s.add_argument("--warmup", type=int, default=2)
    s.set_defaults(fn=bench)
    s = sub.add_parser("hold-port")
    s.add_argument("port", type=int)
    s.add_argument("--seconds", type=float, default=30)
    s.set_defaults(fn=hold_port)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
