"""Helpers of the forward-protocol tests: hand-built frames, raw sockets, and reading the
events back through the Kafka front end with confluent-kafka (librdkafka) and kcat."""

import gzip
import json
import pathlib
import socket
import subprocess
import time

import msgpack
from confluent_kafka import Consumer, TopicPartition

HERE = pathlib.Path(__file__).resolve().parent


def event_time(secs, nanos=0):
    """EventTime: ext type 0 with u32 seconds and u32 nanoseconds (fixext8)."""
    return msgpack.ExtType(0, secs.to_bytes(4, "big") + nanos.to_bytes(4, "big"))


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def entries(events):
    """Concatenated [time, record] entries of a PackedForward chunk."""
    return b"".join(pack([t, r]) for t, r in events)


def str_header(n):
    """A str32 head of n bytes: senders that put packed entries in a str."""
    return b"\xdb" + n.to_bytes(4, "big")


def gzipped(data):
    return gzip.compress(data)


class Conn:
    """A raw TCP connection to the forward listener with a reply decoder."""

    def __init__(self, addr, timeout=10):
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.unpacker = msgpack.Unpacker(raw=False)

    def send(self, data):
        self.sock.sendall(data)

    def reply(self):
        """The next MessagePack reply (an ack, HELO, PONG)."""
        for obj in self.unpacker:
            return obj
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.unpacker.feed(data)
            for obj in self.unpacker:
                return obj

    def raw_reply(self, n):
        """Exactly n raw reply bytes."""
        out = b""
        while len(out) < n:
            data = self.sock.recv(n - len(out))
            if not data:
                raise ConnectionError("closed by the server")
            out += data
        return out

    def closed_by_server(self, timeout=5):
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def kafka_read(nagare, topic, count, timeout=20):
    """Reads `count` records of partition 0 from offset 0 with confluent-kafka; returns
    [(timestamp_ms, value bytes, {header: bytes})] in log order."""
    c = Consumer(
        {
            "bootstrap.servers": nagare.kafka,
            "group.id": f"fwd-test-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    try:
        while len(out) < count and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                continue
            _, ts = m.timestamp()
            out.append((ts, m.value(), dict(m.headers() or [])))
    finally:
        c.close()
    assert len(out) == count, f"read {len(out)} of {count} records from {topic}"
    return out


def kcat_read(nagare, topic, count, timeout=20):
    """Reads `count` records with kcat; returns [(timestamp_ms, value str, headers str)]."""
    fmt = "%T\\t%h\\t%s\\n"
    r = subprocess.run(
        ["kcat", "-C", "-b", nagare.kafka, "-t", topic, "-p", "0", "-o", "beginning",
         "-c", str(count), "-e", "-q", "-f", fmt],
        capture_output=True, text=True, timeout=timeout,
    )
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.split("\n") if ln]
    assert len(lines) == count, r.stdout + r.stderr
    return [(int(ts), value, headers) for ts, headers, value in (ln.split("\t", 2) for ln in lines)]


def check_events(records, tag, count, first_secs=1_700_000_000, nanos_step=1000, prefix=None):
    """The records the senders of these tests emit: event i is {"seq": i, "msg": ...} at
    first_secs + i seconds and i * nanos_step nanoseconds, in order."""
    assert len(records) == count
    for i, (ts, value, headers) in enumerate(records):
        v = json.loads(value)
        assert v["seq"] == i, (i, v)
        if prefix is not None:
            assert v["msg"] == f"{prefix} {i}"
        assert headers["fluent.tag"] == tag.encode()
        secs = first_secs + i
        assert ts == secs * 1000 + (i * nanos_step) // 1_000_000
        if nanos_step is not None:
            assert headers["fluent.time_ns"] == str(secs * 10**9 + i * nanos_step).encode()


def write_config(tmp_path, text):
    p = tmp_path / "nagare.toml"
    p.write_text(text)
    return ["--config", str(p)]


def wait_log(nagare, *texts, timeout=5):
    """The server's log once it contains every one of `texts` (lines may trail the close)."""
    deadline = time.time() + timeout
    while True:
        log = nagare.read_log()
        if all(t in log for t in texts) or time.time() > deadline:
            return log
        time.sleep(0.05)
