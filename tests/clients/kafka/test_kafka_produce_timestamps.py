"""Produce and the topic's timestamp settings, with confluent-kafka (librdkafka):
`message.timestamp.type=LogAppendTime` answers the broker's append time in the Produce
response (the delivery report's timestamp is LOG_APPEND_TIME), and CreateTime timestamps
outside `message.timestamp.before.max.ms` / `after.max.ms` fail the whole partition batch
with INVALID_TIMESTAMP, nothing stored."""

import time
import uuid

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

HOUR = 3_600_000


def topic_with(nagare, config):
    name = f"ts-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(10)
    return name


def produce(nagare, topic, timestamps):
    """Sends one record per timestamp (0: the producer's clock) in one batch; returns the
    delivery reports (error, timestamp type, timestamp)."""
    reports = []
    p = Producer({"bootstrap.servers": nagare.kafka, "linger.ms": 500,
                  "message.send.max.retries": 0, "message.timeout.ms": 10000})
    # The partition's leader first: a record produced before it is known waits in the
    # producer, and its linger can run out meanwhile on a loaded machine, so that it is
    # sent alone and the batch is split.
    p.list_topics(topic, timeout=10)
    for ts in timestamps:
        p.produce(topic, b"v", partition=0, timestamp=ts,
                  on_delivery=lambda err, msg: reports.append((err, *msg.timestamp())))
    assert p.flush(15) == 0
    return reports


def high_watermark(nagare, topic):
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_log_append_time_is_answered_by_produce(nagare):
    topic = topic_with(nagare, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    reports = produce(nagare, topic, [1000, 2000])
    after = int(time.time() * 1000)
    assert len(reports) == 2
    for err, kind, ts in reports:
        assert err is None
        assert kind == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000
    # CreateTime (the default): the producer's own timestamp, no append time.
    plain = topic_with(nagare, {})
    [(err, kind, ts)] = produce(nagare, plain, [1234])
    assert err is None and kind == TIMESTAMP_CREATE_TIME and ts == 1234


def test_future_timestamps_past_after_max_are_refused(nagare):
    topic = topic_with(nagare, {"message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    reports = produce(nagare, topic, [now, now + HOUR])
    assert [r[0].code() if r[0] else None for r in reports] == [KafkaError.INVALID_TIMESTAMP] * 2
    assert high_watermark(nagare, topic) == 0
    reports = produce(nagare, topic, [now, now + 1000])
    assert [r[0] for r in reports] == [None, None]
    assert high_watermark(nagare, topic) == 2


def test_old_timestamps_past_before_max_are_refused(nagare):
    topic = topic_with(nagare, {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    # The first record is in range, the second (a negative delta in the batch) is not.
    reports = produce(nagare, topic, [now, now - HOUR])
    assert [r[0].code() if r[0] else None for r in reports] == [KafkaError.INVALID_TIMESTAMP] * 2
    assert high_watermark(nagare, topic) == 0
    # Kafka's default (no lower bound) takes any age.
    old = topic_with(nagare, {})
    assert [r[0] for r in produce(nagare, old, [1, now])] == [None, None]
