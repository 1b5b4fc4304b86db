"""Slow /topic subscribers against a real nagare: many raw-socket subscribers that never
read, a stomp.py publisher sending 20 MB to their topic. The publisher finishes without
waiting for them, the server's memory stays bounded (they fall behind in the log instead
of buffering it), and a stalled subscriber that starts reading gets every message in
order, caught up from the log."""

import pathlib
import socket
import time
import uuid

from stomputil import connect

SLOW = 200
MESSAGES = 2000
BODY = 10 * 1024
RSS_LIMIT_MIB = 300


def rss_mib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def read_frame(sock, buf):
    """One frame from `sock` as (command, headers, body, rest of the buffer); EOLs
    between frames are skipped."""
    while True:
        buf = buf.lstrip(b"\r\n")
        end = buf.find(b"\n\n")
        if end >= 0:
            lines = buf[:end].decode().split("\n")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers.setdefault(k, v)
            start = end + 2
            if "content-length" in headers:
                stop = start + int(headers["content-length"])
            else:
                stop = buf.find(b"\0", start)
            if stop >= 0 and len(buf) > stop:
                return lines[0], headers, buf[start:stop], buf[stop + 1:]
        chunk = sock.recv(1 << 16)
        assert chunk, "connection closed"
        buf += chunk


def slow_subscriber(addr, dest):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive window: the server's writes to it stop at once.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(30)
    s.connect(addr)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0")
    cmd, _, _, rest = read_frame(s, b"")
    assert cmd == "CONNECTED"
    s.sendall(f"SUBSCRIBE\nid:0\ndestination:{dest}\nack:auto\nreceipt:sub\n\n\0".encode())
    cmd, headers, _, rest = read_frame(s, rest)
    assert cmd == "RECEIPT" and headers["receipt-id"] == "sub"
    return s, rest


def test_slow_subscribers_neither_hold_memory_nor_block_the_publisher(nagare):
    dest = f"/topic/slow-{uuid.uuid4().hex[:8]}"
    subs = [slow_subscriber(nagare.stomp, dest) for _ in range(SLOW)]
    pub = connect(nagare, "1.2")
    body = "x" * BODY
    t0 = time.time()
    for i in range(MESSAGES):
        pub.send(dest, body, headers={"seq": str(i)})
    pub.send(dest, "last", headers={"seq": str(MESSAGES)}, receipt="done")
    pub.collector.receipt("done", timeout=60)
    elapsed = time.time() - t0
    assert elapsed < 60, f"publisher took {elapsed:.1f} s"
    time.sleep(1)
    rss = rss_mib(nagare.proc.pid)
    assert rss < RSS_LIMIT_MIB, f"server RSS {rss:.0f} MiB with {SLOW} slow subscribers"

    # One of them starts reading: everything arrives, in order, from the log.
    sock, buf = subs[0]
    for i in range(MESSAGES + 1):
        cmd, headers, got, buf = read_frame(sock, buf)
        assert cmd == "MESSAGE"
        assert headers["seq"] == str(i)
        assert len(got) == (BODY if i < MESSAGES else 4)
    pub.disconnect()
    for s, _ in subs:
        s.close()
