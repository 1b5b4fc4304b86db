"""Helpers shared by the consumer-group tests: topics, producing, polling consumers."""

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for f in fs.values():
        f.result(timeout=10)


def produce(bootstrap, topic, n, partitions=1):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(15) == 0


def consumer(bootstrap, group, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    conf.update(extra)
    return Consumer(conf)


def poll_until(consumers, cond, timeout, sink=None):
    """Polls every consumer in turn until cond() holds; collects values into sink."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None and sink is not None:
                sink.append((m.partition(), m.offset(), m.value()))
        if cond():
            return True
    return False
