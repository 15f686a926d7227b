#!/usr/bin/env python3
"""Direct-I/O workload for tests/integration/io.sh and bench/io.sh.

dio.py both PATH MIB CHUNK_KIB OUT.json [--gate FILE]

The parent first allocates PATH (MIB MiB written through the page cache and
fsync'ed), so that the children's direct I/O changes no file-system metadata.
Then a writer child overwrites it with O_DIRECT in CHUNK_KIB pieces and
fdatasync()s, and a reader child reads it back with O_DIRECT. O_DIRECT
bypasses the page cache, so every byte becomes a block request issued by
that child. Buffers come from mmap (page-aligned, as O_DIRECT needs).
With --gate FILE it first waits for FILE to exist (so that a test can attach
ntcore -p to it). OUT.json records the children's pids, the bytes each moved and the device
(MAJOR:MINOR, from stat st_dev) of the file system holding PATH.
"""
import fcntl
import json
import mmap
import os
import struct
import sys
import time

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 1
FIEMAP_EXTENT_LAST = 1


def do_write(path, mib, chunk):
    buf = mmap.mmap(-1, chunk)
    buf.write(b"\xa5" * chunk)
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    done, total = 0, mib << 20
    while done < total:
        n = os.write(fd, buf)
        if n <= 0:
            sys.exit("short write")
        done += n
    os.fdatasync(fd)
    os.close(fd)
    return {"pid": os.getpid(), "op": "write", "bytes": done}


def prealloc(path, mib):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"\0" * (1 << 20)
    for _ in range(mib):
        os.write(fd, block)
    os.fsync(fd)
    os.close(fd)


def do_read(path, mib, chunk):
    buf = mmap.mmap(-1, chunk)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    done, total = 0, mib << 20
    while done < total:
        n = os.readv(fd, [buf])
        if n <= 0:
            sys.exit("short read at %d" % done)
        done += n
    os.close(fd)
    return {"pid": os.getpid(), "op": "read", "bytes": done}


def extents(path):
    """Physical byte ranges of the file on its file system's device
    (FIEMAP), as [[start, length], ...]; None when the ioctl is refused."""
    out, start = [], 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            n = 32
            req = struct.pack("QQIIII", start, 2**64 - 1 - start, FIEMAP_FLAG_SYNC, 0, n, 0)
            buf = bytearray(req + b"\0" * (56 * n))
            try:
                fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
            except OSError:
                return None
            mapped = struct.unpack_from("I", buf, 20)[0]
            last = False
            for i in range(mapped):
                lo, ph, ln, _, _, fl = struct.unpack_from("QQQQQI", buf, 32 + 56 * i)
                out.append([ph, ln])
                start = lo + ln
                last = bool(fl & FIEMAP_EXTENT_LAST)
            if last or mapped == 0:
                return out
    finally:
        os.close(fd)


def child(fn, *args):
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        os.write(wr, json.dumps(fn(*args)).encode())
        os._exit(0)
    os.close(wr)
    data = b""
    while True:
        b = os.read(rd, 4096)
        if not b:
            break
        data += b
    os.close(rd)
    _, st = os.waitpid(pid, 0)
    if st != 0:
        sys.exit("child failed: %d" % st)
    return json.loads(data)


def main():
    mode, path, mib, chunk, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) << 10, sys.argv[5]
    if (mib << 20) % chunk:
        sys.exit("MIB must be a multiple of the chunk")
    if mode != "both":
        sys.exit("usage: dio.py both PATH MIB CHUNK_KIB OUT.json [--gate FILE]")
    if "--gate" in sys.argv:
        gate = sys.argv[sys.argv.index("--gate") + 1]
        for _ in range(600):
            if os.path.exists(gate):
                break
            time.sleep(0.05)
        else:
            sys.exit("gate %s never appeared" % gate)
    prealloc(path, mib)
    res = {"parent": os.getpid()}
    res["write"] = child(do_write, path, mib, chunk)
    res["read"] = child(do_read, path, mib, chunk)
    st = os.stat(path)
    res["dev"] = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    res["mib"] = mib
    res["extents"] = extents(path)
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
