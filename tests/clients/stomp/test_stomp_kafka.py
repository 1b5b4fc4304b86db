"""Across the shared log: what STOMP clients SEND to /topic/T, Kafka consumers read from
topic T (value, key, headers); what Kafka producers write (compressed too) reaches STOMP
subscribers; a STOMP queue's topic is readable by Kafka consumers."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from stomputil import connect


def kafka_read(bootstrap, topic, n, timeout=20):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            continue
        out.append(m)
    c.close()
    return out


def test_stomp_to_kafka(nagare):
    topic = f"s2k-{uuid.uuid4().hex[:8]}"
    c = connect(nagare)
    for i in range(10):
        c.send(f"/topic/{topic}", f"body {i}", headers={"key": f"k{i}", "app": "stomp"},
               receipt=f"r{i}")
    for i in range(10):
        c.collector.receipt(f"r{i}")
    msgs = kafka_read(nagare.kafka, topic, 10)
    assert [m.value() for m in msgs] == [f"body {i}".encode() for i in range(10)]
    assert [m.key() for m in msgs] == [f"k{i}".encode() for i in range(10)]
    headers = dict(msgs[0].headers())
    assert headers["app"] == b"stomp"
    assert "destination" not in headers and "receipt" not in headers


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd", "snappy"])
def test_kafka_to_stomp(nagare, codec):
    topic = f"k2s-{codec}-{uuid.uuid4().hex[:8]}"
    sub = connect(nagare, "1.2", binary=True)
    sub.subscribe(f"/topic/{topic}", id="1", receipt="s")
    sub.collector.receipt("s")
    p = Producer({"bootstrap.servers": nagare.kafka, "compression.type": codec,
                  "linger.ms": 5, "acks": "all"})
    for i in range(50):
        p.produce(topic, value=f"kafka {i}".encode(), key=f"key{i}".encode(), partition=0,
                  headers=[("origin", b"kafka"), ("n", str(i).encode())])
    assert p.flush(15) == 0
    got = sub.collector.take(50, timeout=20)
    assert [f.body for f in got] == [f"kafka {i}".encode() for i in range(50)]
    assert [f.headers["n"] for f in got] == [str(i) for i in range(50)]
    assert all(f.headers["origin"] == "kafka" for f in got)
    assert [f.headers["key"] for f in got] == [f"key{i}" for i in range(50)]


def test_queue_messages_are_readable_by_kafka(nagare):
    q = f"jobs{uuid.uuid4().hex[:8]}"
    c = connect(nagare)
    for i in range(5):
        c.send(f"/queue/{q}", f"job {i}", receipt=f"r{i}")
    for i in range(5):
        c.collector.receipt(f"r{i}")
    msgs = kafka_read(nagare.kafka, f"queue.{q}", 5)
    assert [m.value() for m in msgs] == [f"job {i}".encode() for i in range(5)]
