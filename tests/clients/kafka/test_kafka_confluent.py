"""confluent-kafka (librdkafka 2.x): idempotent producer with every codec, keys and headers,
AdminClient topic management and configs."""

import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic


def consume_all(bootstrap, topic, n, partitions=(0,), timeout=20):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + uuid.uuid4().hex,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = []
    import time

    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
        if m.error() is None:
            out.append(m)
    c.close()
    return out


def test_idempotent_producer_every_codec_keys_and_headers(nagare):
    topic = "conf-idem"
    sent = []
    for codec in ["gzip", "snappy", "lz4", "zstd", "none"]:
        p = Producer({"bootstrap.servers": nagare.kafka, "enable.idempotence": True,
                      "compression.type": codec, "linger.ms": 5})
        errors = []
        for i in range(200):
            key = f"{codec}-{i}".encode()
            value = (f"value {codec} {i} " * 5).encode()
            headers = [("codec", codec.encode()), ("n", str(i).encode())]
            sent.append((key, value, headers))
            p.produce(topic, value, key, partition=0, headers=headers,
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert p.flush(20) == 0
        assert errors == []
    got = consume_all(nagare.kafka, topic, len(sent))
    assert [(m.key(), m.value(), m.headers()) for m in got] == sent
    assert [m.offset() for m in got] == list(range(len(sent)))


def test_admin_create_list_describe_delete(nagare):
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    futures = admin.create_topics([NewTopic("adm-a", 3, 1), NewTopic("adm-b", -1, -1, config={"retention.ms": "1000"})])
    for f in futures.values():
        f.result(10)
    again = admin.create_topics([NewTopic("adm-a", 1, 1)])
    try:
        again["adm-a"].result(10)
        raise AssertionError("duplicate create succeeded")
    except Exception as e:  # noqa: BLE001 - KafkaException wrapping TOPIC_ALREADY_EXISTS
        assert "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e)
    admin.create_topics([NewTopic("adm-dry", 2, 1)], validate_only=True)["adm-dry"].result(10)
    bad = admin.create_topics([NewTopic("bad/name", 1, 1), NewTopic("adm-rf", 1, 3)])
    for name, f in bad.items():
        try:
            f.result(10)
            raise AssertionError(f"{name} was created")
        except Exception as e:  # noqa: BLE001
            assert "INVALID" in str(e) or "nvalid" in str(e), str(e)
    md = admin.list_topics(timeout=10)
    assert "adm-dry" not in md.topics
    assert len(md.topics["adm-a"].partitions) == 3
    assert "adm-b" in md.topics
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-b")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "1000"
    for key in ("cleanup.policy", "max.message.bytes", "segment.bytes"):
        assert key in configs
    admin.create_partitions([NewPartitions("adm-a", 5)])["adm-a"].result(10)
    assert len(admin.list_topics(timeout=10).topics["adm-a"].partitions) == 5
    for f in admin.delete_topics(["adm-a", "adm-b"]).values():
        f.result(10)
    md = admin.list_topics(timeout=10)
    assert "adm-a" not in md.topics and "adm-b" not in md.topics


def test_admin_describe_cluster_and_broker_configs(nagare):
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    cluster = admin.describe_cluster(request_timeout=10).result(10)
    assert len(cluster.nodes) == 1
    node = cluster.nodes[0]
    assert f"{node.host}:{node.port}" == nagare.kafka
    assert cluster.controller.id == node.id
    assert cluster.cluster_id
    res = ConfigResource(ConfigResource.Type.BROKER, str(node.id))
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["num.partitions"].value == "1"


def test_message_too_large_is_refused(nagare):
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    admin.create_topics([NewTopic("small", 1, 1, config={"max.message.bytes": "2000"})])["small"].result(10)
    p = Producer({"bootstrap.servers": nagare.kafka, "message.max.bytes": 100000})
    errors = []
    p.produce("small", b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    p.produce("small", b"ok", on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors[1] is None
