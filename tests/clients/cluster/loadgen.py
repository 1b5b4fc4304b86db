"""Steady client load through gateways that keeps the record a fault test checks against:
which message ids were acknowledged (a STOMP RECEIPT, a forward ack), when, and which were
sent more than once because the client retried.

- StompSender: stomp.py, receipted SENDs with a window of outstanding receipts; on an
  ERROR, a lost connection or a receipt overdue it reconnects (next gateway in its list)
  and sends the unacknowledged ids again (recorded as retried).
- QueueConsumer: stomp.py, client-individual ACK of every MESSAGE; reconnects likewise.
- ForwardLoad: the Go ackedsender (fluent-logger-golang, RequestAck) reporting each ack.
"""

import queue
import threading
import time

import stomp

from clusterutil import Collector, start_acked_sender


class _Conn:
    """Connects to the first gateway of `addrs` that answers, rotating after failures."""

    def __init__(self, addrs):
        self.addrs = list(addrs)
        self.next = 0
        self.connects = 0

    def open(self, listener=None):
        addr = self.addrs[self.next % len(self.addrs)]
        self.next += 1
        conn = stomp.Connection12([addr], heartbeats=(0, 0), timeout=5, reconnect_attempts_max=1)
        collector = Collector()
        conn.set_listener("c", collector)
        if listener is not None:
            conn.set_listener("l", listener)
        conn.connect(wait=True)
        conn.collector = collector
        self.connects += 1
        return conn


def _close(conn):
    try:
        conn.disconnect()
    except Exception:  # noqa: BLE001 - the connection is already gone
        pass


class _Acked:
    """What a load generator reports: `acked` (id -> ack time) and `sent` (id -> when its
    acknowledged send began), both under `lock`."""

    def acked_ids(self):
        with self.lock:
            return set(self.acked)

    def ack_times(self):
        with self.lock:
            return sorted(self.acked.values())

    def ack_pairs(self):
        """[(send time, ack time)] of every acknowledged message or event."""
        with self.lock:
            return [(self.sent[m], t) for m, t in self.acked.items()]


class StompSender(_Acked, threading.Thread):
    """Receipted SENDs of ids NAME-0, NAME-1, ... to `dest(i)`."""

    def __init__(self, name, addrs, dest, window=8, overdue=30.0, pace=0.0):
        super().__init__(daemon=True, name=f"stomp-sender-{name}")
        self.prefix, self.conns, self.dest = name, _Conn(addrs), dest
        self.window, self.overdue, self.pace = window, overdue, pace
        self.stop_flag = threading.Event()
        self.acked = {}  # id -> ack time
        self.sent = {}  # id -> when its acknowledged send was made
        self.retried = set()
        self.errors = []
        self.latencies = []
        self.lock = threading.Lock()

    def stop(self, drain=30.0):
        """Stops sending; waits up to `drain` seconds for outstanding receipts."""
        self.drain = drain
        self.stop_flag.set()
        self.join(drain + 15)

    def run(self):
        conn = None
        pending = {}  # id -> (send time, destination)
        resend = []  # ids to send again, in order
        i = 0
        drain_until = None
        while True:
            if self.stop_flag.is_set() and drain_until is None:
                drain_until = time.time() + self.drain
            if drain_until is not None and (not pending or time.time() > drain_until):
                break
            if conn is None:
                if drain_until is not None:
                    break  # no resends while stopping: what is unacknowledged stays so
                try:
                    conn = self.conns.open()
                except Exception as e:  # noqa: BLE001
                    self.errors.append(f"{time.time():.3f} connect: {e}")
                    time.sleep(0.2)
                    continue
            try:
                while drain_until is None and len(pending) < self.window:
                    if resend:
                        mid, again = resend.pop(0), True
                    else:
                        mid, again = f"{self.prefix}-{i}", False
                        i += 1
                    dest = self.dest(int(mid.rsplit("-", 1)[1]))
                    if again:
                        self.retried.add(mid)
                    pending[mid] = (time.time(), dest)
                    conn.send(dest, mid, headers={"x-id": mid}, receipt=mid)
                    if self.pace:
                        time.sleep(self.pace)
                try:
                    rid = conn.collector.receipts.get(timeout=0.2)
                except queue.Empty:
                    rid = None
                now = time.time()
                if rid in pending:
                    sent, _ = pending.pop(rid)
                    with self.lock:
                        self.acked[rid] = now
                        self.sent[rid] = sent
                        self.latencies.append(now - sent)
                failed = None
                if not conn.collector.errors.empty():
                    f = conn.collector.errors.get()
                    failed = f"ERROR {f.headers.get('message')} {f.body[:200]!r}"
                elif conn.collector.disconnected or not conn.is_connected():
                    failed = "disconnected"
                elif pending and now - min(t for t, _ in pending.values()) > self.overdue:
                    failed = f"no receipt within {self.overdue}s"
                if failed:
                    raise ConnectionError(failed)
            except Exception as e:  # noqa: BLE001 - any failure: reconnect and resend
                self.errors.append(f"{time.time():.3f} {e} ({len(pending)} unacknowledged)")
                _close(conn)
                conn = None
                resend = sorted(pending, key=lambda m: int(m.rsplit("-", 1)[1])) + resend
                pending.clear()
                time.sleep(0.2)
        if conn is not None:
            _close(conn)
        self.unacked = set(pending) | set(resend)


class QueueConsumer(threading.Thread):
    """Consumes a queue with client-individual ACKs; records every id it processed."""

    def __init__(self, name, addrs, dest, prefetch=20):
        super().__init__(daemon=True, name=f"queue-consumer-{name}")
        self.name_, self.conns, self.dest, self.prefetch = name, _Conn(addrs), dest, prefetch
        self.stop_flag = threading.Event()
        self.seen = []
        self.errors = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()

    def ids(self):
        with self.lock:
            return list(self.seen)

    def stop(self):
        self.stop_flag.set()
        self.join(20)

    def run(self):
        conn = None
        me = self

        class Listener(stomp.ConnectionListener):
            def __init__(self):
                self.conn = None

            def on_message(self, frame):
                with me.lock:
                    me.seen.append(frame.body)
                try:
                    self.conn.ack(frame.headers["ack"])
                except Exception as e:  # noqa: BLE001 - the connection died; redelivered later
                    me.errors.append(f"{time.time():.3f} ack: {e}")

        while not self.stop_flag.is_set():
            if conn is None:
                try:
                    listener = Listener()
                    conn = self.conns.open(listener)
                    listener.conn = conn
                    conn.subscribe(self.dest, id=f"q-{self.name_}", ack="client-individual",
                                   headers={"prefetch-count": str(self.prefetch)}, receipt="sub")
                    conn.collector.receipt("sub", timeout=30)
                    self.subscribed.set()
                except Exception as e:  # noqa: BLE001
                    self.errors.append(f"{time.time():.3f} subscribe: {e}")
                    if conn is not None:
                        _close(conn)
                    conn = None
                    time.sleep(0.5)
                    continue
            time.sleep(0.2)
            if conn.collector.disconnected or not conn.is_connected() or not conn.collector.errors.empty():
                self.errors.append(f"{time.time():.3f} connection lost")
                _close(conn)
                conn = None
        if conn is not None:
            _close(conn)


class ForwardLoad(_Acked):
    """The Go ackedsender with its output read as it comes: acked ids with their times and
    the ids it sent again after a failure."""

    def __init__(self, addrs, tag, prefix, *args):
        self.proc = start_acked_sender(addrs, tag, prefix, *args)
        self.acked = {}
        self.sent = {}
        self.retried = set()
        self.retry_lines = []
        self.done = None
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            word, _, rest = line.strip().partition(" ")
            now = time.time()
            with self.lock:
                if word == "ack":
                    mid, _, sent = rest.partition(" ")
                    self.acked[mid] = now
                    self.sent[mid] = int(sent) / 1000 if sent else now
                elif word == "retry":
                    mid, _, why = rest.partition(" ")
                    self.retried.add(mid)
                    self.retry_lines.append(f"{now:.3f} {rest}")
                elif word == "done":
                    self.done = rest

    def stop(self, timeout=30):
        """Closes its stdin; it finishes the event in flight (bounded by its timeouts)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        assert self.done is not None, f"ackedsender ended without a summary: {self.proc.stderr.read()[-2000:]}"


def longest_gap(times, start, end):
    """The longest time without an acknowledgement between start and end."""
    points = [start] + [t for t in times if start <= t <= end] + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def first_sent_after(pairs, t):
    """Seconds from t to the first acknowledgement of a message sent after t (what was
    in flight at t does not count)."""
    later = [acked for sent, acked in pairs if sent >= t]
    return min(later) - t if later else None
