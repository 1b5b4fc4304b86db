"""Offsets: out-of-range fetches reset by the client, timestamp lookups (ListOffsets through
the time index), latest/earliest, and acks=0 (also from a client that closes right
after sending)."""

import socket
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder


def test_out_of_range_offset_resets_to_earliest(nagare):
    p = Producer({"bootstrap.servers": nagare.kafka})
    for i in range(10):
        p.produce("oor", f"v{i}".encode(), partition=0)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("oor", 0, 1000)])
    got = []
    deadline = time.time() + 15
    while len(got) < 10 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.offset())
    c.close()
    assert got == list(range(10))


def test_offsets_for_times_and_watermarks(nagare):
    p = Producer({"bootstrap.servers": nagare.kafka, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(20):
        p.produce("times", f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused"})
    low, high = c.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
    assert (low, high) == (0, 20)
    found = c.offsets_for_times([TopicPartition("times", 0, base + 7500)], timeout=10)
    assert found[0].offset == 8
    beyond = c.offsets_for_times([TopicPartition("times", 0, base + 10**9)], timeout=10)
    assert beyond[0].offset in (-1, 20)  # no such record: "end" (librdkafka maps -1 to END)
    c.close()


def test_kafka_python_acks_0(nagare):
    p = KafkaProducer(bootstrap_servers=nagare.kafka, acks=0)
    for i in range(50):
        p.send("acks0", f"v{i}".encode(), partition=0)
    p.flush(10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=nagare.kafka, enable_auto_commit=False, consumer_timeout_ms=8000)
    tp = KTopicPartition("acks0", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 50:
            break
    c.close()
    assert got == [f"v{i}".encode() for i in range(50)]


def partition_values(nagare, topic, n):
    """Up to `n` values of partition 0 of `topic` from its start (bounded: 20 s)."""
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 20
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def produce_v3(correlation, topic, values, acks, partition=0):
    """A Produce v3 request (header v1) with one batch of `values` for `partition`."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    records = bytes(builder.build())
    name = topic.encode()
    body = (struct.pack(">hhii", -1, acks, 10000, 1) + struct.pack(">h", len(name)) + name
            + struct.pack(">iii", 1, partition, len(records)) + records)
    msg = struct.pack(">hhih", 0, 3, correlation, 3) + b"raw" + body
    return struct.pack(">i", len(msg)) + msg


def test_requests_sent_just_before_close_are_all_applied(nagare):
    """Produce requests that arrived whole are carried out when the client closes its side
    right after writing them: an acks=0 producer that closes (nothing is answered), and an
    acks=1 client that half-closes and then reads its answers, which all come before the
    broker closes. More requests than one connection runs at a time, in one write."""
    p = Producer({"bootstrap.servers": nagare.kafka})
    p.produce("closing", b"first", partition=0)
    assert p.flush(10) == 0
    host, port = nagare.kafka.rsplit(":", 1)
    expected = [b"first"]
    for acks in (0, 1):
        requests = []
        for r in range(40):
            values = [f"a{acks}-r{r}-{i}".encode() for i in range(10)]
            expected += values
            requests.append(produce_v3(r + 1, "closing", values, acks))
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"".join(requests))
            s.shutdown(socket.SHUT_WR)
            answers = b""
            while chunk := s.recv(65536):
                answers += chunk
        correlations = []
        while answers:
            size, correlation = struct.unpack(">ii", answers[:8])
            correlations.append(correlation)
            answers = answers[4 + size:]
        assert correlations == ([] if acks == 0 else list(range(1, 41)))
    assert partition_values(nagare, "closing", len(expected)) == expected


def test_failed_acks_0_produce_closes_the_connection(nagare):
    """As Kafka: an acks=0 produce gets no answer, so when it fails (here, a partition the
    topic does not have) the broker closes the connection for the producer to notice.
    What came before it on that connection is stored; the broker keeps serving."""
    p = Producer({"bootstrap.servers": nagare.kafka})
    p.produce("acks0-fail", b"first", partition=0)
    assert p.flush(10) == 0
    host, port = nagare.kafka.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(produce_v3(1, "acks0-fail", [b"stored"], 0)
                  + produce_v3(2, "acks0-fail", [b"refused"], 0, partition=7))
        s.settimeout(10)
        assert s.recv(4096) == b"", "the connection stays open after a failed acks=0 produce"
    assert partition_values(nagare, "acks0-fail", 2) == [b"first", b"stored"]
