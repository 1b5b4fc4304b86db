"""Disk full, end to end: a real `nagare serve` whose data directory is a small tmpfs.

A Kafka producer (acks=all) fills it until the broker refuses with KAFKA_STORAGE_ERROR.
While full: the process stays up, every acknowledged record reads back intact, another
partition keeps serving reads, a STOMP SEND with a receipt gets an ERROR (no RECEIPT) and
a forward chunk gets no ack. Once the tmpfs grows, Kafka, STOMP and forward writes go
through again without a restart.

Mounting needs root: run as anyone else, the test fails (it is never skipped).
"""

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Nagare

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "forward"))
sys.path.insert(0, str(HERE / "stomp"))
from fwdutil import Conn, entries, event_time, pack  # noqa: E402
from stomputil import Raw  # noqa: E402

SMALL = "16m"
LARGE = "64m"
VALUE = 64 * 1024  # larger than a page: a full tmpfs cannot take it in a partly used page
FILL_LIMIT = 2 * 64 * 1024 * 1024 // VALUE  # records: twice what the large size holds


@pytest.fixture
def tmpfs_nagare():
    if os.geteuid() != 0:
        pytest.fail("the disk-full test mounts a tmpfs and must run as root")
    base = pathlib.Path(tempfile.mkdtemp(prefix="nagare-diskfull-"))
    data = base / "data"
    data.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL}", "tmpfs", str(data)], check=True)
    n = Nagare(data)
    try:
        yield n.start()
    finally:
        try:
            if n.alive():
                n.stop()
        finally:
            r = subprocess.run(["umount", str(data)])
            if r.returncode != 0:
                subprocess.run(["umount", "-l", str(data)])
            shutil.rmtree(base, ignore_errors=True)


def read_partition(bootstrap, topic, partition, n, timeout=30):
    """The first n records of one partition as {offset: value}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "df-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "fetch.message.max.bytes": 1 << 20})
    c.assign([TopicPartition(topic, partition, 0)])
    out = {}
    deadline = time.time() + timeout
    try:
        while len(out) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            out[m.offset()] = m.value()
    finally:
        c.close()
    return out


def produce_one(p, topic, value, partition=0):
    """Produces one record and waits for its outcome: (error, offset)."""
    got = []
    p.produce(topic, value, partition=partition,
              on_delivery=lambda err, msg: got.append((err, msg.offset())))
    p.flush(30)
    assert got, "no delivery report within 30 s (the broker hung)"
    return got[0]


def stomp_send(nagare, queue, body, receipt):
    """SENDs with a receipt on a fresh connection: the frame the server answers with."""
    r = Raw(nagare.stomp, timeout=20)
    try:
        cmd, _, _ = r.connect()
        assert cmd == "CONNECTED"
        r.send(f"SEND\ndestination:/queue/{queue}\nreceipt:{receipt}\n"
               f"content-length:{len(body)}\n\n".encode() + body + b"\0")
        return r.frame()
    finally:
        r.close()


def forward_send(nagare, tag, record, chunk):
    """A PackedForward chunk with a `chunk` option: its ack, or None (no ack: timeout or
    the connection closed by the server)."""
    c = Conn(nagare.forward, timeout=15)
    try:
        c.send(pack([tag, entries([(event_time(1_700_000_000), record)]), {"chunk": chunk}]))
        try:
            return c.reply()
        except (socket.timeout, ConnectionError):
            return None
    finally:
        c.sock.close()


def test_disk_full_refuses_writes_keeps_data_and_recovers(tmpfs_nagare):
    n = tmpfs_nagare
    admin = AdminClient({"bootstrap.servers": n.kafka})
    for f in admin.create_topics([NewTopic("fill", 1, 1), NewTopic("other", 1, 1)]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": n.kafka, "acks": "all", "retries": 0,
                  "linger.ms": 0, "message.timeout.ms": 30000})
    for i in range(10):
        err, _ = produce_one(p, "other", f"other {i}".encode())
        assert err is None, err
    queue = "df" + uuid.uuid4().hex[:6]
    big_body = b"s" * VALUE
    cmd, h, _ = stomp_send(n, queue, b"before", "r0")
    assert cmd == "RECEIPT" and h["receipt-id"] == "r0", (cmd, h)
    assert forward_send(n, "df.fwd", {"n": 0}, "c0") == {"ack": "c0"}

    # Fill until the broker refuses; every acknowledged record is remembered.
    acked = {}
    refusal = None
    for i in range(FILL_LIMIT):
        value = f"{i:08d}".encode() + os.urandom(VALUE - 8)
        err, offset = produce_one(p, "fill", value)
        if err is not None:
            refusal = err
            break
        acked[offset] = value
    assert refusal is not None, f"{FILL_LIMIT} records of {VALUE} bytes fitted in {SMALL}"
    assert refusal.code() == KafkaError.KAFKA_STORAGE_ERROR, refusal
    print(f"{len(acked)} records of {VALUE} bytes acknowledged before the disk was full")
    assert len(acked) > 10, f"only {len(acked)} records fitted before the disk was full"
    assert n.alive(), n.read_log()
    # Still full: a second attempt is refused the same way, promptly.
    err, _ = produce_one(p, "fill", b"f" * VALUE)
    assert err is not None and err.code() == KafkaError.KAFKA_STORAGE_ERROR, err
    # The refusal is visible in the log and the metrics.
    assert any("kafka record batch refused" in ln and "storage_error" in ln
               for ln in n.read_log().splitlines()), n.read_log()
    metrics = urllib.request.urlopen(f"http://{n.http}/metrics", timeout=10).read().decode()
    assert any(ln.startswith("nagare_rejected_total{") and 'protocol="kafka"' in ln
               and 'reason="storage_error"' in ln for ln in metrics.splitlines()), metrics

    # Every acknowledged record is there, intact; the other partition serves reads.
    assert read_partition(n.kafka, "fill", 0, len(acked)) == acked
    other = read_partition(n.kafka, "other", 0, 10)
    assert [other[o] for o in sorted(other)] == [f"other {i}".encode() for i in range(10)]

    # STOMP: an ERROR carrying the receipt id, never a RECEIPT.
    cmd, h, _ = stomp_send(n, queue, big_body, "r1")
    assert cmd == "ERROR", (cmd, h)
    assert h.get("receipt-id") == "r1", h
    # Forward: no ack for the chunk.
    assert forward_send(n, "df.fwd", {"blob": "x" * VALUE}, "c1") is None
    assert n.alive(), n.read_log()

    # Free space: writes go through again, without a restart.
    subprocess.run(["mount", "-o", f"remount,size={LARGE}", str(n.data_dir)], check=True)
    deadline = time.time() + 30
    while True:
        err, offset = produce_one(p, "fill", b"after")
        if err is None or time.time() > deadline:
            break
        time.sleep(0.5)
    assert err is None, err
    cmd, h, _ = stomp_send(n, queue, big_body, "r2")
    assert cmd == "RECEIPT" and h["receipt-id"] == "r2", (cmd, h)
    assert forward_send(n, "df.fwd", {"blob": "y" * VALUE}, "c2") == {"ack": "c2"}

    after = read_partition(n.kafka, "fill", 0, offset + 1)
    assert after[offset] == b"after"
    assert {o: v for o, v in after.items() if o in acked} == acked
    assert n.alive(), n.read_log()
