"""`segment.bytes` and `segment.ms` changed with IncrementalAlterConfigs (confluent-kafka's
AdminClient) apply to the live partition at its next roll, without a restart, as in
Kafka: the segment files of the partition's directory show it."""

import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

TOPIC = ConfigResource.Type.TOPIC


def segments(nagare, topic):
    return sorted((nagare.data_dir / f"{topic}-0").glob("*.log"))


def produce(nagare, topic, count, size=1000):
    p = Producer({"bootstrap.servers": nagare.kafka, "linger.ms": 0, "batch.num.messages": 1})
    for _ in range(count):
        p.produce(topic, b"x" * size, partition=0)
        p.flush(10)


def set_config(a, topic, key, value):
    res = ConfigResource(TOPIC, topic, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(10)


def test_segment_bytes_and_ms_apply_without_restart(nagare):
    a = AdminClient({"bootstrap.servers": nagare.kafka})
    topic = f"seg-{uuid.uuid4().hex[:8]}"
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    produce(nagare, topic, 5)
    assert len(segments(nagare, topic)) == 1
    set_config(a, topic, "segment.bytes", "4096")
    produce(nagare, topic, 12)
    by_size = len(segments(nagare, topic))
    assert by_size >= 3, segments(nagare, topic)
    # Back to large segments, then a short age: the next append after it rolls.
    set_config(a, topic, "segment.bytes", "1073741824")
    set_config(a, topic, "segment.ms", "200")
    time.sleep(0.5)
    produce(nagare, topic, 1)
    assert len(segments(nagare, topic)) > by_size
