"""Kafka's internal topics `__consumer_offsets` and `__transaction_state` as clients see
them (confluent-kafka / librdkafka and kafka-python): listed in Metadata with
is_internal=true and one partition, skipped by regex subscriptions, readable (nagare's
own records, read-only), refused to producers with INVALID_TOPIC_EXCEPTION and to
CreateTopics; ACLs apply to them as to any topic."""

import socket
import struct
import subprocess
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaConsumer

from conftest import BIN, Nagare

INTERNAL = ("__consumer_offsets", "__transaction_state")


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_metadata_lists_internal_topics_with_is_internal(nagare):
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    md = admin.list_topics(timeout=10)
    for name in INTERNAL:
        assert name in md.topics, sorted(md.topics)
        assert list(md.topics[name].partitions) == [0]
        assert md.topics[name].partitions[0].leader >= 0
    # Named, and through DescribeTopics (is_internal comes from the broker).
    described = admin.describe_topics(TopicCollection(list(INTERNAL)))
    for name, f in described.items():
        d = f.result(10)
        assert d.is_internal, name
        assert len(d.partitions) == 1
    ordinary = unique("plain")
    admin.create_topics([NewTopic(ordinary, 1, 1)])[ordinary].result(10)
    assert not admin.describe_topics(TopicCollection([ordinary]))[ordinary].result(10).is_internal


def test_regex_consumers_skip_internal_topics(nagare):
    # kafka-python, like Java's exclude.internal.topics, leaves internal topics out of
    # pattern subscriptions; it knows them from Metadata's is_internal.
    topic = unique("rx")
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    c = KafkaConsumer(bootstrap_servers=nagare.kafka, group_id=unique("g"),
                      metadata_max_age_ms=500, consumer_timeout_ms=1000)
    try:
        c.subscribe(pattern=r"^(__.*|rx-.*)$")
        deadline = time.time() + 20
        while time.time() < deadline and topic not in (c.subscription() or set()):
            c.poll(timeout_ms=200)
        subscribed = c.subscription() or set()
        assert topic in subscribed
        assert not subscribed & set(INTERNAL), subscribed
    finally:
        c.close()


def test_internal_topics_refuse_producers_and_creation(nagare):
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    for name in INTERNAL:
        f = admin.create_topics([NewTopic(name, 1, 1)])[name]
        try:
            f.result(10)
            raise AssertionError(f"{name} was created")
        except Exception as e:  # noqa: BLE001
            assert "INVALID" in str(e) or "nvalid" in str(e) or "EXISTS" in str(e), str(e)
    errors = []
    p = Producer({"bootstrap.servers": nagare.kafka, "message.send.max.retries": 0,
                  "message.timeout.ms": 10000})
    p.produce("__consumer_offsets", b"x", partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors[0]


def test_consumer_offsets_is_readable_after_a_commit(nagare):
    topic, group = unique("co"), unique("g")
    p = Producer({"bootstrap.servers": nagare.kafka})
    p.produce(topic, b"v")
    p.flush(10)
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        msg = None
        deadline = time.time() + 20
        while msg is None and time.time() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None
        c.commit(message=msg, asynchronous=False)
    finally:
        c.close()
    reader = Consumer({"bootstrap.servers": nagare.kafka, "group.id": unique("r"),
                       "enable.auto.commit": False})
    try:
        low, high = reader.get_watermark_offsets(TopicPartition("__consumer_offsets", 0),
                                                 timeout=10)
        assert low == 0 and high >= 1
        reader.assign([TopicPartition("__consumer_offsets", 0, 0)])
        seen = []
        deadline = time.time() + 20
        while (not seen or seen[-1].offset() < high - 1) and time.time() < deadline:
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                seen.append(m)
        # The records are nagare's own encoding of the coordinator's state; the group's
        # name is in them.
        assert seen and any(group.encode() in (m.key() or b"") + (m.value() or b"")
                            for m in seen)
    finally:
        reader.close()


def test_acls_apply_to_internal_topics(tmp_path):
    # A broker with --auth required: alice sees __consumer_offsets only with Describe on
    # it, and reads it only with Read, as any topic.
    data = tmp_path / "data"
    users = {"admin": "admin-secret-1", "alice": "alice-secret-2"}
    for name, pw in users.items():
        subprocess.run([BIN, "user", "add", name, "--password", pw, "--data-dir", str(data)],
                       capture_output=True, text=True, timeout=60, check=True)
    n = Nagare(data, ["--auth", "required", "--super-users", "admin"])
    n.start()
    try:
        def conf(user):
            return {"bootstrap.servers": n.kafka, "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                    "sasl.password": users[user]}

        admin = AdminClient(conf("admin"))
        assert "__consumer_offsets" in admin.list_topics(timeout=10).topics
        alice = AdminClient(conf("alice"))
        assert "__consumer_offsets" not in alice.list_topics(timeout=10).topics
        md = alice.list_topics(topic="__consumer_offsets", timeout=10)
        assert md.topics["__consumer_offsets"].error.code() == \
            KafkaError.TOPIC_AUTHORIZATION_FAILED
        binding = AclBinding(ResourceType.TOPIC, "__consumer_offsets",
                             ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for f in admin.create_acls([binding]).values():
            f.result(10)
        deadline = time.time() + 20
        while ("__consumer_offsets" not in alice.list_topics(timeout=10).topics
               and time.time() < deadline):
            time.sleep(0.2)
        assert "__consumer_offsets" in alice.list_topics(timeout=10).topics
        # Describe is not Read: fetching stays refused.
        c = Consumer({**conf("alice"), "group.id": "none", "enable.auto.commit": False})
        try:
            c.assign([TopicPartition("__consumer_offsets", 0, 0)])
            # (Its group is refused too, GROUP_AUTHORIZATION_FAILED: not what is checked.)
            errors = []
            deadline = time.time() + 20
            while time.time() < deadline and not any(
                    e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors):
                m = c.poll(0.5)
                if m is not None and m.error() is not None:
                    errors.append(m.error())
                assert m is None or m.error() is not None, "alice read __consumer_offsets"
            assert any(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors), errors
        finally:
            c.close()
    finally:
        n.stop()


def uvarint(n):
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def read_uvarint(data, pos):
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def test_describe_topic_partitions_marks_them_internal(nagare):
    # DescribeTopicPartitions (75) v0, what the Java Admin's describeTopics sends, spoken
    # directly (flexible request header v2), naming one internal and one unknown topic.
    host, port = nagare.kafka.rsplit(":", 1)
    names = ["__transaction_state", "no-such-topic"]
    body = uvarint(len(names) + 1)
    for name in names:
        body += uvarint(len(name) + 1) + name.encode() + b"\x00"
    body += struct.pack(">i", 100) + b"\xff" + b"\x00"  # limit, null cursor, no tags
    header = struct.pack(">hhi", 75, 0, 7) + struct.pack(">h", 4) + b"test" + b"\x00"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(header + body)) + header + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", data[:4])[0] == 7
    pos = 4 + 1 + 4  # correlation id, header tags, throttle
    count, pos = read_uvarint(data, pos)
    found = {}
    for _ in range(count - 1):
        error = struct.unpack(">h", data[pos:pos + 2])[0]
        n, pos = read_uvarint(data, pos + 2)
        name = data[pos:pos + n - 1].decode()
        pos += n - 1 + 16  # the topic id
        internal = data[pos] == 1
        pos += 1
        parts, pos = read_uvarint(data, pos)
        found[name] = (error, internal, parts - 1)
        break  # the first (sorted) topic is all this test reads
    assert found == {"__transaction_state": (0, True, 1)}, found
