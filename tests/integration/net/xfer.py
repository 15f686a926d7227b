#!/usr/bin/env python3
"""Loopback workload for tests/integration/net.sh.

xfer.py tcp|udp NBYTES OUT.json [--v6] [--gate FILE]

The parent binds a server socket, then forks a receiver and a sender child.
TCP: the sender connects, sends exactly NBYTES, shuts down and closes; the
receiver accepts, reads to EOF and closes.
UDP: the sender sends NBYTES in datagrams of at most CHUNK bytes, each one
acknowledged by the receiver with a 1-byte datagram (stop and wait, so no
datagram is lost on loopback); an empty datagram ends the exchange.
OUT.json records the pids, ports and byte counts each side saw.
With --gate FILE the parent waits for FILE to exist before it starts (so a
test can attach ntcore -p to it first).
"""
import json
import os
import socket
import sys
import time

CHUNK = 8192


def main():
    proto, nbytes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    v6 = "--v6" in sys.argv
    if "--gate" in sys.argv:
        gate = sys.argv[sys.argv.index("--gate") + 1]
        deadline = time.time() + 30
        while not os.path.exists(gate):
            if time.time() > deadline:
                sys.exit("gate %s never appeared" % gate)
            time.sleep(0.05)
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    host = "::1" if v6 else "127.0.0.1"
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    srv = socket.socket(fam, kind)
    srv.bind((host, 0))
    port = srv.getsockname()[1]
    if proto == "tcp":
        srv.listen(1)
    r_rd, r_wr = os.pipe()
    s_rd, s_wr = os.pipe()

    rpid = os.fork()
    if rpid == 0:
        os.close(r_rd)
        got = sent = 0
        if proto == "tcp":
            conn, peer = srv.accept()
            srv.close()
            while True:
                b = conn.recv(65536)
                if not b:
                    break
                got += len(b)
            lport = conn.getsockname()[1]
            conn.close()
        else:
            lport = port
            while True:
                b, peer = srv.recvfrom(65536)
                if not b:
                    break
                got += len(b)
                sent += srv.sendto(b"k", peer)
            srv.close()
        os.write(r_wr, json.dumps({"pid": os.getpid(), "got": got, "sent": sent,
                                   "lport": lport, "rport": peer[1]}).encode())
        os._exit(0)

    spid = os.fork()
    if spid == 0:
        os.close(s_rd)
        srv.close()
        c = socket.socket(fam, kind)
        sent = got = 0
        if proto == "tcp":
            c.connect((host, port))
            buf = b"x" * 65536
            while sent < nbytes:
                sent += c.send(buf[: min(len(buf), nbytes - sent)])
            c.shutdown(socket.SHUT_WR)
            c.recv(1)  # wait for the receiver's close (EOF)
        else:
            c.connect((host, port))
            buf = b"y" * CHUNK
            while sent < nbytes:
                sent += c.send(buf[: min(CHUNK, nbytes - sent)])
                got += len(c.recv(16))
            c.send(b"")
        lport = c.getsockname()[1]
        c.close()
        os.write(s_wr, json.dumps({"pid": os.getpid(), "sent": sent, "got": got,
                                   "lport": lport, "rport": port}).encode())
        os._exit(0)

    srv.close()
    os.close(r_wr)
    os.close(s_wr)
    recv_info = json.loads(os.read(r_rd, 4096))
    send_info = json.loads(os.read(s_rd, 4096))
    for p in (rpid, spid):
        _, st = os.waitpid(p, 0)
        if st != 0:
            sys.exit("child %d failed: %d" % (p, st))
    with open(out, "w") as f:
        json.dump({"proto": proto, "n": nbytes, "port": port,
                   "sender": send_info, "receiver": recv_info}, f)


if __name__ == "__main__":
    main()
