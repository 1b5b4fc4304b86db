"""kafka-python: acks=all produce, consume with assign + seek_to_beginning."""

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def test_kafka_python_acks_all_and_seek_to_beginning(nagare):
    p = KafkaProducer(bootstrap_servers=nagare.kafka, acks="all")
    futures = [p.send("kp", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0) for i in range(100)]
    offsets = [f.get(timeout=20).offset for f in futures]
    assert offsets == list(range(100))
    p.close()
    c = KafkaConsumer(bootstrap_servers=nagare.kafka, enable_auto_commit=False, consumer_timeout_ms=10000)
    tp = TopicPartition("kp", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    for m in c:
        got.append((m.offset, m.key, m.value))
        if len(got) == 100:
            break
    c.close()
    assert got == [(i, f"k{i}".encode(), f"v{i}".encode()) for i in range(100)]
