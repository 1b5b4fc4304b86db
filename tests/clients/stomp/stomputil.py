"""Helpers for the STOMP tests: stomp.py connections with a collecting listener, and a
raw-socket client for frames no library would send."""

import queue
import socket
import time

import stomp

VERSIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Collector(stomp.ConnectionListener):
    """Collects MESSAGE, RECEIPT and ERROR frames; heart-beats are counted."""

    def __init__(self):
        self.messages = queue.Queue()
        self.receipts = queue.Queue()
        self.errors = queue.Queue()
        self.heartbeats = 0
        self.disconnected = False

    def on_message(self, frame):
        self.messages.put(frame)

    def on_receipt(self, frame):
        self.receipts.put(frame.headers.get("receipt-id"))

    def on_error(self, frame):
        self.errors.put(frame)

    def on_heartbeat(self):
        self.heartbeats += 1

    def on_disconnected(self):
        self.disconnected = True

    def take(self, n, timeout=10):
        """Exactly n messages (fails if fewer arrive in time)."""
        out = []
        deadline = time.time() + timeout
        while len(out) < n:
            left = deadline - time.time()
            assert left > 0, f"got {len(out)} of {n} messages"
            try:
                out.append(self.messages.get(timeout=left))
            except queue.Empty:
                pass
        return out

    def none_within(self, seconds):
        try:
            f = self.messages.get(timeout=seconds)
        except queue.Empty:
            return True
        raise AssertionError(f"unexpected message {f.headers} {f.body!r}")

    def receipt(self, rid, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                got = self.receipts.get(timeout=max(0.01, deadline - time.time()))
            except queue.Empty:
                break
            if got == rid:
                return
        raise AssertionError(f"no RECEIPT {rid}")


def connect(nagare, version="1.2", heartbeats=(0, 0), binary=False, vhost=None, **kw):
    cls = VERSIONS[version]
    args = {"heartbeats": heartbeats} if version != "1.0" else {}
    if vhost is not None:
        args["vhost"] = vhost
    if binary:
        args["auto_decode"] = False
    conn = cls([nagare.stomp], **args)
    listener = Collector()
    conn.set_listener("c", listener)
    conn.connect(wait=True, **kw)
    conn.collector = listener
    return conn


def ack(conn, version, frame):
    """ACKs a MESSAGE the way each version says."""
    h = frame.headers
    if version == "1.2":
        conn.ack(h["ack"])
    elif version == "1.1":
        conn.ack(h["message-id"], h["subscription"])
    else:
        conn.ack(h["message-id"])


def nack(conn, version, frame, **kw):
    h = frame.headers
    if version == "1.2":
        conn.nack(h["ack"], **kw)
    else:
        conn.nack(h["message-id"], h["subscription"], **kw)


class Raw:
    """A plain socket speaking STOMP by hand."""

    def __init__(self, addr, timeout=5):
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def connect(self, version="1.2", extra=""):
        self.send(f"CONNECT\naccept-version:{version}\nhost:/\n{extra}\n\0".encode())
        return self.frame()

    def frame(self):
        """Next frame as (command, headers dict, body); None on EOF."""
        while True:
            self.buf = self.buf.lstrip(b"\r\n")
            end = self.buf.find(b"\n\n")
            if end >= 0:
                head = self.buf[:end].decode()
                lines = head.split("\n")
                headers = {}
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    headers.setdefault(k, v)
                start = end + 2
                if "content-length" in headers:
                    stop = start + int(headers["content-length"])
                    if len(self.buf) > stop:
                        body = self.buf[start:stop]
                        self.buf = self.buf[stop + 1:]
                        return lines[0], headers, body
                else:
                    nul = self.buf.find(b"\0", start)
                    if nul >= 0:
                        body = self.buf[start:nul]
                        self.buf = self.buf[nul + 1:]
                        return lines[0], headers, body
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk

    def closed(self, timeout=5):
        """True once the server has closed the socket (any frames before are skipped)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()
