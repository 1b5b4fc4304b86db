"""Malformed, truncated and oversized requests over raw sockets: the offending connection
gets an error or is closed; the server, other connections and stored data are untouched."""

import os
import random
import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def connect(nagare):
    host, port = nagare.kafka.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    return s


def frame(api_key, version, correlation_id, body=b"", client_id=b"raw"):
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_response(s):
    size = struct.unpack(">i", recv_exact(s, 4))[0]
    return recv_exact(s, size)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def closed(s, timeout=5):
    """True when the server closes the connection (EOF or reset) within `timeout`."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def api_versions_ok(nagare):
    with connect(nagare) as s:
        s.sendall(frame(18, 0, 99))
        r = read_response(s)
        cid, err = struct.unpack(">ih", r[:6])
        return cid == 99 and err == 0


def produce_some(nagare, topic, n):
    p = Producer({"bootstrap.servers": nagare.kafka, "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0


def count_records(nagare, topic, n):
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.time() + 15
    while got < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.close()
    return got


def test_api_versions_above_max_answers_v0_with_unsupported_version(nagare):
    with connect(nagare) as s:
        s.sendall(frame(18, 99, 5))
        r = read_response(s)
        cid, err, n = struct.unpack(">ihi", r[:10])
        assert (cid, err) == (5, 35)
        keys = {struct.unpack(">hhh", r[10 + 6 * i: 16 + 6 * i])[0] for i in range(n)}
        assert {0, 1, 2, 3, 18, 19, 20, 22} <= keys
        # The connection stays usable for the retry at v0.
        s.sendall(frame(18, 0, 6))
        assert struct.unpack(">ih", read_response(s)[:6]) == (6, 0)


def test_bad_requests_close_only_their_connection(nagare):
    produce_some(nagare, "safe", 100)
    bystander = connect(nagare)
    bad = [
        struct.pack(">i", 200 * 1024 * 1024) + b"x" * 16,  # oversized
        struct.pack(">i", -5),  # negative size
        struct.pack(">i", 3) + b"abc",  # shorter than a header
        frame(9999, 0, 1),  # unknown api key
        frame(0, 1, 1),  # produce v1 (old message format)
        frame(3, 12, 1, b"\xff" * 3),  # garbage body
        frame(0, 9, 1, os.urandom(40)),  # random produce body
        frame(3, 1, 1, struct.pack(">i", 0x7FFFFFFF)),  # metadata claiming 2^31 topics
        frame(19, 4, 1, struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 8),  # create_topics, huge array
        frame(1, 12, 1, b"\x00" * 25 + b"\xff\xff\xff\xff\x0f"),  # fetch v12, varint count 2^32
        struct.pack(">i", 9) + struct.pack(">hhi", 3, 1, 1) + b"\x00",  # truncated header
    ]
    for payload in bad:
        with connect(nagare) as s:
            s.sendall(payload)
            assert closed(s), payload[:16]
    # A request cut short by the client closing: nothing to answer, nothing to break.
    with connect(nagare) as s:
        s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x01")
    assert nagare.alive()
    # The bystander connection still works, and so do new ones; the data is intact.
    bystander.sendall(frame(18, 0, 42))
    assert struct.unpack(">ih", read_response(bystander)[:6]) == (42, 0)
    bystander.close()
    assert api_versions_ok(nagare)
    assert count_records(nagare, "safe", 100) == 100


def test_random_frames_never_kill_the_server(nagare):
    rng = random.Random(1234)
    for _ in range(200):
        key = rng.choice([0, 1, 2, 3, 18, 19, 20, 22, 23, 32, 37, 60, rng.randrange(-5, 100)])
        version = rng.randrange(-1, 16)
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        with connect(nagare) as s:
            try:
                s.sendall(frame(key, version, 1, body))
                closed(s, timeout=0.5)
            except OSError:
                pass
    assert nagare.alive()
    assert api_versions_ok(nagare)


def test_corrupt_batch_gets_an_error_code_and_nothing_is_stored(nagare):
    produce_some(nagare, "crc", 10)
    # A produce v3 request with a record batch whose CRC is wrong.
    batch = bytearray(struct.pack(">qiibIhiqqqhii", 0, 49 + 7, 0, 2, 0xDEADBEEF, 0, 0, 0, 0, -1, -1, -1, 1))
    batch += bytes([7 * 2, 0, 0, 0, 1, 2, 0])  # crude record body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    topic = b"crc"
    body = struct.pack(">hhi", -1, 1, 5000)  # transactional_id null, acks=1, timeout
    body += struct.pack(">ih", 1, len(topic)) + topic
    body += struct.pack(">iii", 1, 0, len(batch)) + bytes(batch)
    with connect(nagare) as s:
        s.sendall(frame(0, 3, 77, body))
        r = read_response(s)
    cid = struct.unpack(">i", r[:4])[0]
    assert cid == 77
    # topics[1] name partitions[1] index error_code
    at = 4 + 4 + 2 + len(topic) + 4 + 4
    err = struct.unpack(">h", r[at:at + 2])[0]
    assert err in (2, 87), err  # CORRUPT_MESSAGE / INVALID_RECORD
    assert count_records(nagare, "crc", 10) == 10
