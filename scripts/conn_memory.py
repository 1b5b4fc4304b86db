#!/usr/bin/env python3
"""Resident memory of a nagare server holding many connections (not part of the suite).

Starts `nagare serve` on loopback with a fresh data directory and a raised descriptor
limit, then for each protocol in turn opens N idle connections (Kafka: one ApiVersions
request answered, then silence; STOMP: CONNECT/CONNECTED, then silence; forward: connected,
nothing sent), prints the server's RSS from /proc, and closes them. Last, it opens
SLOW STOMP subscribers to one topic that never read their sockets, publishes to that
topic, and prints the RSS again: the server's outbound budgets must keep it flat.

    scripts/conn_memory.py [--bin target/release/nagare] [-n 10000] [--slow 1000]
"""

import argparse
import os
import pathlib
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time


def rss_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def start(binary, workdir, nofile):
    ports = workdir / "ports"
    args = [binary, "serve", "--data-dir", str(workdir / "data"), "--ports-file", str(ports),
            "--log", "warn"]
    for name in ("kafka", "stomp", "forward", "http"):
        args += [f"--{name}-listen", "127.0.0.1:0"]
    proc = subprocess.Popen(args, stderr=open(workdir / "log", "wb"),
                            preexec_fn=lambda: raise_nofile(nofile))
    deadline = time.time() + 30
    while not ports.exists():
        if proc.poll() is not None or time.time() > deadline:
            sys.exit(f"nagare did not start:\n{(workdir / 'log').read_text()}")
        time.sleep(0.05)
    addrs = {}
    for line in ports.read_text().split():
        name, addr = line.split("=", 1)
        host, port = addr.rsplit(":", 1)
        addrs[name] = (host, int(port))
    return proc, addrs


def api_versions_request(correlation):
    body = struct.pack(">hhih", 18, 0, correlation, 4) + b"conn"
    return struct.pack(">i", len(body)) + body


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def open_kafka(addr):
    s = socket.create_connection(addr, timeout=10)
    s.sendall(api_versions_request(1))
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    recv_exact(s, size)
    return s


def read_frame(s):
    buf = b""
    while b"\0" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def open_stomp(addr, subscribe=None):
    s = socket.create_connection(addr, timeout=10)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0")
    if not read_frame(s).startswith(b"CONNECTED"):
        raise ConnectionError("no CONNECTED")
    if subscribe:
        s.sendall(f"SUBSCRIBE\nid:0\ndestination:{subscribe}\nreceipt:r\n\n\0".encode())
        read_frame(s)
    return s


def open_forward(addr):
    return socket.create_connection(addr, timeout=10)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(pathlib.Path(__file__).resolve().parents[1]
                                         / "target" / "release" / "nagare"))
    ap.add_argument("-n", type=int, default=10_000, help="idle connections per protocol")
    ap.add_argument("--slow", type=int, default=1_000, help="slow STOMP subscribers")
    ap.add_argument("--publish-mib", type=int, default=64, help="MiB sent to the slow ones")
    a = ap.parse_args()
    nofile = raise_nofile(a.n + a.slow + 200)
    work = pathlib.Path(tempfile.mkdtemp(prefix="nagare-connmem-"))
    proc, addrs = start(a.bin, work, nofile)
    try:
        time.sleep(0.5)
        print(f"idle server: RSS {rss_mib(proc.pid):.1f} MiB")
        for name, opener in (("kafka", open_kafka), ("stomp", open_stomp),
                             ("forward", open_forward)):
            conns = []
            t0 = time.time()
            for _ in range(a.n):
                conns.append(opener(addrs[name]))
            time.sleep(1)
            rss = rss_mib(proc.pid)
            print(f"{a.n} idle {name} connections (opened in {time.time() - t0:.1f} s): "
                  f"RSS {rss:.1f} MiB, {rss * 1024 / a.n:.1f} KiB per connection over total")
            for c in conns:
                c.close()
            time.sleep(2)
        slow = [open_stomp(addrs["stomp"], "/topic/slow") for _ in range(a.slow)]
        for s in slow:
            # A small receive window makes the subscribers as slow as they can be.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        pub = open_stomp(addrs["stomp"])
        body = b"x" * 1024
        frame = (b"SEND\ndestination:/topic/slow\ncontent-length:1024\n\n" + body + b"\0")
        t0 = time.time()
        sent = 0
        stalled = ""
        while sent < a.publish_mib * 1024 and time.time() - t0 < 120:
            try:
                pub.sendall(frame * 64)
            except socket.timeout:
                # The server stopped reading the publisher for 10 s: report it, not crash.
                stalled = " (publisher stalled: not read for 10 s)"
                break
            sent += 64
        time.sleep(3)
        print(f"{a.slow} slow STOMP subscribers after {sent // 1024} MiB published "
              f"({time.time() - t0:.1f} s){stalled}: RSS {rss_mib(proc.pid):.1f} MiB")
        for s in slow:
            s.close()
        pub.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
