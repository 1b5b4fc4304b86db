"""confluent-kafka (librdkafka) consumer groups: partitions split between members, move
on leave and on session expiry, and committed offsets survive a broker restart."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from confluent_kafka import TopicPartition

from groups_util import consumer, create_topic, poll_until, produce

HERE = os.path.dirname(os.path.abspath(__file__))


def names(c):
    return sorted(tp.partition for tp in c.assignment())


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_consumers_split_four_partitions_and_failover(nagare, strategy):
    topic, group = "grp-split", "g-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 4)
    produce(nagare.kafka, topic, 1000, partitions=4)
    seen = []
    conf = {"partition.assignment.strategy": strategy}
    a = consumer(nagare.kafka, group, **conf)
    a.subscribe([topic])
    assert poll_until([a], lambda: len(names(a)) == 4, 15, seen), "first member gets all 4"
    b = consumer(nagare.kafka, group, **conf)
    t0 = time.time()
    b.subscribe([topic])
    split = lambda: len(names(a)) == 2 and len(names(b)) == 2  # noqa: E731
    assert poll_until([a, b], split, 20, seen), (names(a), names(b))
    print(f"both assigned {time.time() - t0:.3f}s after the second subscribe()")
    assert sorted(names(a) + names(b)) == [0, 1, 2, 3]
    # Let both consume a while and commit, then one leaves.
    poll_until([a, b], lambda: False, 1.0, seen)
    b.commit(asynchronous=False)
    b.close()
    t1 = time.time()
    assert poll_until([a], lambda: len(names(a)) == 4, 6, seen), names(a)
    print(f"re-assigned {time.time() - t1:.3f}s after the other member left")
    values = lambda: {int(v) for _, _, v in seen}  # noqa: E731
    assert poll_until([a], lambda: len(values()) == 1000, 20, seen)
    assert values() == set(range(1000)), "nothing lost"
    a.close()


def test_commit_survives_broker_restart(nagare):
    topic, group = "grp-restart", "g-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 1)
    produce(nagare.kafka, topic, 1000)
    c = consumer(nagare.kafka, group, **{"enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    while len(got) < 400:
        msgs = c.consume(num_messages=400 - len(got), timeout=1.0)
        got.extend(m for m in msgs if m.error() is None)
        assert len(got) < 400 or got[399].offset() == 399
    committed = c.commit(offsets=[TopicPartition(topic, 0, 400)], asynchronous=False)
    assert committed[0].error is None and committed[0].offset == 400
    c.close()
    nagare.restart()
    c = consumer(nagare.kafka, group, **{"enable.auto.commit": False})
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 400
    c.subscribe([topic])
    first = None
    deadline = time.time() + 20
    while first is None and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            first = m
    assert first is not None and first.offset() == 400 and first.value() == b"400"
    c.close()


def test_killed_consumer_is_expired_after_its_session_timeout(nagare):
    topic, group = "grp-expiry", "g-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 4)
    child = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "member_proc.py"), nagare.kafka, group, topic],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "assigned"
        a = consumer(nagare.kafka, group)
        a.subscribe([topic])
        assert poll_until([a], lambda: len(names(a)) == 2, 20), names(a)
        child.send_signal(signal.SIGKILL)  # no LeaveGroup
        child.wait()
        t0 = time.time()
        assert poll_until([a], lambda: len(names(a)) == 4, 15), names(a)
        took = time.time() - t0
        print(f"dead member expired and partitions moved after {took:.2f}s")
        assert took > 3, "moved before the 6 s session timeout could have passed"
        a.close()
    finally:
        if child.poll() is None:
            child.kill()


def test_admin_lists_describes_and_deletes_groups(nagare):
    from confluent_kafka.admin import AdminClient

    topic, group = "grp-admin", "g-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 2)
    produce(nagare.kafka, topic, 10, partitions=2)
    c = consumer(nagare.kafka, group)
    c.subscribe([topic])
    assert poll_until([c], lambda: len(names(c)) == 2, 15)
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    listed = admin.list_consumer_groups().result(timeout=10)
    assert group in [g.group_id for g in listed.valid]
    desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert str(desc.state).endswith("STABLE")
    assert len(desc.members) == 1
    assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1]
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    fut = admin.delete_consumer_groups([group])[group]
    try:
        fut.result(timeout=10)
        raise AssertionError("a live group must not be deletable")
    except Exception as e:  # noqa: BLE001
        assert "NON_EMPTY_GROUP" in str(e) or "not empty" in str(e).lower(), e
    c.close()
    admin.delete_consumer_groups([group])[group].result(timeout=10)
    listed = admin.list_consumer_groups().result(timeout=10)
    assert group not in [g.group_id for g in listed.valid]


def test_live_member_rejoins_after_a_broker_restart(nagare):
    """Members are not persisted: after a restart a live consumer hears UNKNOWN_MEMBER_ID,
    rejoins and goes on from its committed offsets."""
    topic, group = "grp-live-restart", "g-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 2)
    produce(nagare.kafka, topic, 100, partitions=2)
    seen = []
    c = consumer(nagare.kafka, group, **{"auto.commit.interval.ms": 200})
    c.subscribe([topic])
    assert poll_until([c], lambda: len(seen) == 100, 20, seen)
    c.commit(asynchronous=False)
    nagare.restart()
    produce(nagare.kafka, topic, 100, partitions=2)
    assert poll_until([c], lambda: len(seen) >= 200, 30, seen), len(seen)
    assert sorted(int(v) for _, _, v in seen[100:]) == list(range(100)), "no replay, no gap"
    c.close()
