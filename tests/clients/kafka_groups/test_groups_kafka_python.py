"""kafka-python group consumers: subscribe, commit, resume; and a kafka-python member
sharing a group with a librdkafka member."""

import time
import uuid

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from groups_util import consumer, create_topic, poll_until, produce


def kp_consumer(bootstrap, group, **extra):
    conf = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                consumer_timeout_ms=500)
    conf.update(extra)
    return KafkaConsumer(**conf)


def test_subscribe_commit_and_resume(nagare):
    topic, group = "kp-resume", "kp-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 2)
    produce(nagare.kafka, topic, 200, partitions=2)
    c = kp_consumer(nagare.kafka, group)
    c.subscribe([topic])
    got = []
    deadline = time.time() + 20
    while len(got) < 60 and time.time() < deadline:
        for tp, msgs in c.poll(timeout_ms=500, max_records=60 - len(got)).items():
            got.extend(msgs)
    assert len(got) == 60
    assert c.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    positions = {tp: c.position(tp) for tp in c.assignment()}
    c.commit({tp: OffsetAndMetadata(pos, "kp-meta", -1) for tp, pos in positions.items()})
    c.close()

    c = kp_consumer(nagare.kafka, group)
    for tp, pos in positions.items():
        meta = c.committed(tp, metadata=True)
        assert meta.offset == pos and meta.metadata == "kp-meta"
    c.subscribe([topic])
    rest = []
    deadline = time.time() + 20
    while len(rest) < 140 and time.time() < deadline:
        for tp, msgs in c.poll(timeout_ms=500).items():
            rest.extend(msgs)
    c.close()
    values = sorted(int(m.value) for m in got + rest)
    assert values == list(range(200)), "resumed exactly where the commit was"


def test_kafka_python_and_librdkafka_share_a_group(nagare):
    topic, group = "kp-mixed", "kp-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 4)
    kp = kp_consumer(nagare.kafka, group)
    kp.subscribe([topic])
    deadline = time.time() + 15
    while len(kp.assignment()) != 4 and time.time() < deadline:
        kp.poll(timeout_ms=200)
    assert len(kp.assignment()) == 4
    rd = consumer(nagare.kafka, group, **{"partition.assignment.strategy": "range"})
    rd.subscribe([topic])

    def split():
        kp.poll(timeout_ms=50)
        return len(kp.assignment()) == 2 and len(rd.assignment()) == 2

    assert poll_until([rd], split, 30), (kp.assignment(), rd.assignment())
    mine = {tp.partition for tp in kp.assignment()}
    theirs = {tp.partition for tp in rd.assignment()}
    assert mine | theirs == {0, 1, 2, 3} and not mine & theirs
    rd.close()
    kp.close()


def test_offset_delete_keeps_offsets_of_subscribed_topics(nagare):
    """OffsetDelete on a live consumer group: offsets of topics in the members'
    subscriptions stay (GROUP_SUBSCRIBED_TO_TOPIC), others go."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupSubscribedToTopicError, NoError

    subscribed, other = "kp-od-sub", "kp-od-other"
    group = "kp-" + uuid.uuid4().hex
    create_topic(nagare.kafka, subscribed, 1)
    create_topic(nagare.kafka, other, 1)
    produce(nagare.kafka, subscribed, 10)
    c = kp_consumer(nagare.kafka, group)
    # kafka-python's leader assigns from the metadata it has when the group forms; a
    # slow first metadata answer leaves it without the topic until its next refresh.
    assert c.partitions_for_topic(subscribed) == {0}
    c.subscribe([subscribed])
    deadline = time.time() + 15
    while not c.assignment() and time.time() < deadline:
        c.poll(timeout_ms=200)
    assert c.assignment() == {TopicPartition(subscribed, 0)}
    sub_tp, other_tp = TopicPartition(subscribed, 0), TopicPartition(other, 0)
    c.commit({sub_tp: OffsetAndMetadata(5, "", -1), other_tp: OffsetAndMetadata(3, "", -1)})
    admin = KafkaAdminClient(bootstrap_servers=nagare.kafka)
    try:
        result = admin.delete_group_offsets(group, [sub_tp, other_tp])
        assert result == {sub_tp: GroupSubscribedToTopicError, other_tp: NoError}
        assert c.committed(sub_tp) == 5
        assert c.committed(other_tp) is None
    finally:
        admin.close()
        c.close()
