#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Workloads of tests/integration/anomaly.sh: a steady phase, then (unless
--steady) a change at a known moment, whose wall-clock time (ns since the
epoch, as the file sink writes `ts`) and step go to OUT (JSON).

  io FILE BEFORE_S AFTER_S OUT     O_DIRECT reads of FILE: 1 MiB requests,
                                   then 4 KiB ones (mostly-small I/O)
  net BEFORE_S AFTER_S OUT         loopback TCP: 200 KB/s, then as fast as
                                   it goes (a network burst)
  steps FILE STEPS SLOW_AT OUT     train_step() reads 8 MiB of FILE with
                                   O_DIRECT in 256 KiB requests and waits
                                   80 ms (a GPU); from step SLOW_AT on it
                                   reads them in 4 KiB requests (2-4x slower)
"""
import json
import mmap
import os
import socket
import sys
import threading
import time


def now():
    return time.time_ns()


def direct_reader(path, chunk):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    buf = mmap.mmap(-1, chunk)  # page aligned, as O_DIRECT needs
    state = {"off": 0}

    def read(nbytes):
        done = 0
        while done < nbytes:
            if state["off"] + chunk > size:
                state["off"] = 0
            os.preadv(fd, [buf], state["off"])
            state["off"] += chunk
            done += chunk
    return read


def io_mode(path, before, after, out, steady):
    big = direct_reader(path, 1 << 20)
    small = direct_reader(path, 4096)
    t_end = time.monotonic() + before
    while time.monotonic() < t_end:
        big(4 << 20)
        time.sleep(0.05)
    change = now()
    read = big if steady else small
    t_end = time.monotonic() + after
    while time.monotonic() < t_end:
        read((4 << 20) if steady else (256 << 10))
        if steady:
            time.sleep(0.05)
    return {"change_ns": change}


def net_mode(before, after, out, steady):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def sink():
        c, _ = srv.accept()
        while c.recv(1 << 20):
            pass
    th = threading.Thread(target=sink)
    th.start()
    cli = socket.create_connection(("127.0.0.1", port))
    block = b"x" * 10000
    t_end = time.monotonic() + before
    while time.monotonic() < t_end:
        cli.sendall(block)
        time.sleep(0.05)
    change = now()
    big = b"y" * (1 << 20)
    t_end = time.monotonic() + after
    while time.monotonic() < t_end:
        if steady:
            cli.sendall(block)
            time.sleep(0.05)
        else:
            cli.sendall(big)
    cli.close()
    th.join()
    srv.close()
    return {"change_ns": change}


def busy(seconds):
    t_end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < t_end:
        x += 1
    return x


def steps_mode(path, steps, slow_at, out, steady):
    big = direct_reader(path, 256 << 10)
    small = direct_reader(path, 4096)
    log = {"step_ns": []}

    def train_step(read):
        read(8 << 20)
        time.sleep(0.08)

    for i in range(steps):
        log["step_ns"].append(now())
        if i == slow_at:
            log["change_ns"] = now()
            log["slow_at"] = i
        train_step(big if steady or i < slow_at else small)
    log["end_ns"] = now()
    return log


def main():
    a = [x for x in sys.argv[1:] if x != "--steady"]
    steady = "--steady" in sys.argv
    mode = a[0]
    if mode == "io":
        res = io_mode(a[1], float(a[2]), float(a[3]), a[4], steady)
        out = a[4]
    elif mode == "net":
        res = net_mode(float(a[1]), float(a[2]), a[3], steady)
        out = a[3]
    elif mode == "steps":
        res = steps_mode(a[1], int(a[2]), int(a[3]), a[4], steady)
        out = a[4]
    else:
        sys.exit("usage: see the module docstring")
    res["steady"] = steady
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
