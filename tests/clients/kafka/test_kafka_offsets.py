"""Offsets: out-of-range fetches reset by the client, timestamp lookups (ListOffsets through
the time index), latest/earliest, and acks=0."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition


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
