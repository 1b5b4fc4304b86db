"""librdkafka's share consumer (confluent-kafka 2.16.1's ShareConsumer, a KIP-932
preview): two consumers share a topic, each record accepted once; an explicit RELEASE
comes back with a higher delivery count; and it shares one queue with the Java client."""

import time
import uuid

from confluent_kafka import AcknowledgeType, ShareConsumer

from share_util import create_topic, produce, set_group_config


def share_consumer(bootstrap, group, **extra):
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    conf.update(extra)
    return ShareConsumer(conf)


def names(prefix):
    suffix = uuid.uuid4().hex[:8]
    return f"{prefix}-{suffix}", f"{prefix}-g-{suffix}"


def test_two_librdkafka_share_consumers_split_a_topic(nagare):
    topic, group = names("rdk-share")
    create_topic(nagare.kafka, topic, 2)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    consumers = [share_consumer(nagare.kafka, group) for _ in range(2)]
    for c in consumers:
        c.subscribe([topic])
    got = {0: [], 1: []}
    try:
        # Both join before anything arrives, so neither drains it alone.
        for _ in range(3):
            for c in consumers:
                c.poll(0.5)
        produce(nagare.kafka, topic, 2000, partitions=2)
        deadline = time.time() + 60
        while len(got[0]) + len(got[1]) < 2000 and time.time() < deadline:
            for i, c in enumerate(consumers):
                for m in c.poll(0.2) or []:
                    assert not m.error(), m.error()
                    assert m.delivery_count() == 1
                    got[i].append(int(m.value()))
        for c in consumers:
            c.poll(0.5)  # acknowledges the last records (implicit mode)
    finally:
        for c in consumers:
            c.close()
    assert got[0] and got[1], {k: len(v) for k, v in got.items()}
    assert sorted(got[0] + got[1]) == list(range(2000))


def test_librdkafka_release_redelivers_with_a_higher_count(nagare):
    topic, group = names("rdk-release")
    create_topic(nagare.kafka, topic, 1)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    produce(nagare.kafka, topic, 10)
    c = share_consumer(nagare.kafka, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    counts = {}
    try:
        deadline = time.time() + 30
        done = lambda: len(counts) == 10 and all(len(v) == 2 for v in counts.values())  # noqa: E731
        while not done() and time.time() < deadline:
            for m in c.poll(0.5) or []:
                assert not m.error(), m.error()
                seen = counts.setdefault(int(m.value()), [])
                seen.append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE if len(seen) == 1 else AcknowledgeType.ACCEPT)
            c.commit_sync()
    finally:
        c.close()
    assert counts == {i: [1, 2] for i in range(10)}, counts
