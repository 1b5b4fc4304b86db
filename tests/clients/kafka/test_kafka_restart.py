"""Restart between produce and consume: everything acknowledged is still there, offsets and
idempotent producer ids continue."""

import signal
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def produce(bootstrap, topic, n, start=0):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    offsets = []
    for i in range(start, start + n):
        p.produce(topic, f"v{i}".encode(), f"k{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: offsets.append(None if err else msg.offset()))
    assert p.flush(20) == 0
    return offsets


def consume(bootstrap, topic, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 20
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def test_restart_keeps_everything(nagare):
    assert produce(nagare.kafka, "rs", 1000) == list(range(1000))
    nagare.restart()
    got = consume(nagare.kafka, "rs", 1000)
    assert got == [(i, f"k{i}".encode(), f"v{i}".encode()) for i in range(1000)]
    # Appends continue after the recovered end; a new idempotent producer gets a new id.
    assert produce(nagare.kafka, "rs", 10, start=1000) == list(range(1000, 1010))


def test_crash_keeps_acks_all_records(nagare):
    assert produce(nagare.kafka, "crash", 500) == list(range(500))
    nagare.restart(sig=signal.SIGKILL)
    assert len(consume(nagare.kafka, "crash", 500)) == 500
