"""Kafka ACLs with real clients on a broker started with `--auth required` (so nothing
is allowed without an ACL, as Kafka with allow.everyone.if.no.acl.found=false): a super
user manages ACLs with confluent-kafka's AdminClient (CreateAcls, DescribeAcls,
DeleteAcls), and alice (SCRAM-SHA-512 over SASL_PLAINTEXT) meets them: refused produce
and consume, allowed once an ALLOW is created (on her open connection), topics hidden
from Metadata, DENY over ALLOW, PREFIXED patterns, group ACLs, and ACLs that survive a
restart. kafka-python sees the same refusals."""

import pathlib
import subprocess
import time
import uuid

import kafka
import kafka.errors
import pytest
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from conftest import BIN, Nagare

USERS = {"admin": "admin-secret-1", "alice": "alice-secret-2"}
WAIT = 20  # seconds any expected change may take to be seen


def make_broker(data):
    for name, pw in USERS.items():
        subprocess.run([BIN, "user", "add", name, "--password", pw, "--data-dir", str(data)],
                       capture_output=True, text=True, timeout=60, check=True)
    return Nagare(data, ["--auth", "required", "--super-users", "admin"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    n = make_broker(tmp_path_factory.mktemp("acls") / "data")
    n.start()
    yield n
    n.stop()


def conf(n, user, **extra):
    c = {"bootstrap.servers": n.kafka, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
         "sasl.password": USERS[user],
         # Errors (and newly granted access) are noticed quickly.
         "topic.metadata.refresh.interval.ms": 500}
    c.update(extra)
    return c


def admin(n):
    return AdminClient(conf(n, "admin"))


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(n, topic):
    a = admin(n)  # kept alive until the futures complete
    for f in a.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(WAIT)


def acl(name, op, permission=AclPermissionType.ALLOW, rtype=ResourceType.TOPIC,
        pattern=ResourcePatternType.LITERAL, principal="User:alice"):
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def create_acls(n, *bindings):
    a = admin(n)
    for f in a.create_acls(list(bindings)).values():
        f.result(WAIT)


def try_produce(p, topic):
    """One message; None when delivered, else the Kafka error code."""
    got = []
    try:
        p.produce(topic, b"x", on_delivery=lambda err, msg: got.append(err))
    except KafkaException as e:
        return e.args[0].code()
    p.flush(WAIT)
    assert got, "no delivery report"
    return None if got[0] is None else got[0].code()


def produce_until(p, topic, want):
    """Produces until the outcome is `want` (None: delivered), within WAIT seconds."""
    deadline = time.time() + WAIT
    seen = []
    while time.time() < deadline:
        seen.append(try_produce(p, topic))
        if seen[-1] == want:
            return
        time.sleep(0.3)
    pytest.fail(f"wanted {want} producing to {topic}, got {seen}")


def poll_until(c, pred, what):
    """Polls until pred(message) holds for a message or error event; returns it."""
    deadline = time.time() + WAIT
    seen = []
    while time.time() < deadline:
        m = c.poll(0.3)
        if m is None:
            continue
        if pred(m):
            return m
        seen.append(m.error() or m.value())
    pytest.fail(f"no {what} within {WAIT} s; saw {seen[-10:]}")


def is_error(code):
    return lambda m: m.error() is not None and m.error().code() == code


def test_acl_admin_api_create_describe_delete(broker):
    a = admin(broker)
    topic = unique("acl-admin")
    bindings = [acl(topic, AclOperation.READ),
                acl(topic, AclOperation.WRITE, AclPermissionType.DENY),
                acl("acl-admin-pre-", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED)]
    for f in a.create_acls(bindings).values():
        f.result(WAIT)
    mine = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                            None, None, AclOperation.ANY, AclPermissionType.ANY)
    found = a.describe_acls(mine).result(WAIT)
    assert sorted(found, key=str) == sorted(bindings[:2], key=str)
    # MATCH finds the prefixed one for a name under its prefix.
    match = AclBindingFilter(ResourceType.TOPIC, "acl-admin-pre-x", ResourcePatternType.MATCH,
                             None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert a.describe_acls(match).result(WAIT) == [bindings[2]]
    # Delete the DENY only.
    deny = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                            AclOperation.ANY, AclPermissionType.DENY)
    deleted = [f.result(WAIT) for f in a.delete_acls([deny]).values()]
    assert deleted == [[bindings[1]]]
    assert a.describe_acls(mine).result(WAIT) == [bindings[0]]
    # alice may not manage ACLs.
    alice = AdminClient(conf(broker, "alice"))
    with pytest.raises(KafkaException) as e:
        for f in alice.create_acls([acl(topic, AclOperation.WRITE)]).values():
            f.result(WAIT)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The broker answers CLUSTER_AUTHORIZATION_FAILED, but librdkafka drops DescribeAcls'
    # top-level error code and reports an empty listing; either way nothing leaks. (The
    # Java test below sees the error itself.)
    assert alice.describe_acls(mine).result(WAIT) == []
    # Clean up what this test made.
    cleanup = [AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
               for name in (topic, "acl-admin-pre-")]
    for f in a.delete_acls(cleanup).values():
        f.result(WAIT)


def test_produce_and_consume_denied_then_allowed_without_reconnecting(broker):
    topic = unique("acl-pc")
    group = unique("acl-pc-g")
    create_topic(broker, topic)
    p = Producer(conf(broker, "alice", **{"message.timeout.ms": 10000}))
    produce_until(p, topic, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    create_acls(broker, acl(topic, AclOperation.WRITE))
    produce_until(p, topic, None)

    c = Consumer(conf(broker, "alice", **{"group.id": group, "enable.auto.commit": False}))
    try:
        # Her group is allowed; the topic is not yet readable.
        create_acls(broker, acl(group, AclOperation.READ, rtype=ResourceType.GROUP))
        c.assign([TopicPartition(topic, 0, 0)])
        poll_until(c, is_error(KafkaError.TOPIC_AUTHORIZATION_FAILED), "authorization error")
        create_acls(broker, acl(topic, AclOperation.READ))
        m = poll_until(c, lambda m: m.error() is None, "message")
        assert m.value() == b"x"
    finally:
        c.close()


def test_metadata_hides_topics_alice_may_not_describe(broker):
    hidden, seen = unique("acl-hidden"), unique("acl-seen")
    for t in (hidden, seen):
        create_topic(broker, t)
    create_acls(broker, acl(seen, AclOperation.DESCRIBE))
    alice = AdminClient(conf(broker, "alice"))
    topics = alice.list_topics(timeout=WAIT).topics
    assert seen in topics and hidden not in topics
    assert hidden in admin(broker).list_topics(timeout=WAIT).topics
    # Named explicitly: TOPIC_AUTHORIZATION_FAILED, and never auto-created.
    md = alice.list_topics(topic=hidden, timeout=WAIT)
    assert md.topics[hidden].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    ghost = unique("acl-ghost")
    md = alice.list_topics(topic=ghost, timeout=WAIT)
    assert md.topics[ghost].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert ghost not in admin(broker).list_topics(timeout=WAIT).topics


def test_deny_beats_allow_and_prefixed_acls_apply(broker):
    prefix = unique("acl-pre") + "-"
    allowed, denied = prefix + "ok", prefix + "no"
    for t in (allowed, denied):
        create_topic(broker, t)
    create_acls(broker,
                acl(prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
                acl(denied, AclOperation.WRITE, AclPermissionType.DENY))
    p = Producer(conf(broker, "alice", **{"message.timeout.ms": 10000}))
    produce_until(p, allowed, None)
    produce_until(p, denied, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    # Outside the prefix nothing is allowed.
    other = unique("acl-other")
    create_topic(broker, other)
    produce_until(p, other, KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_consumer_group_denied_without_group_acl(broker):
    topic, group = unique("acl-grp"), unique("acl-grp-g")
    create_topic(broker, topic)
    create_acls(broker, acl(topic, AclOperation.READ))
    c = Consumer(conf(broker, "alice", **{"group.id": group, "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        poll_until(c, is_error(KafkaError.GROUP_AUTHORIZATION_FAILED), "group authorization error")
    finally:
        c.close()
    # With Read on the group the same consumer setup joins and reads.
    p = Producer(conf(broker, "admin"))
    p.produce(topic, b"g")
    assert p.flush(WAIT) == 0
    create_acls(broker, acl(group, AclOperation.READ, rtype=ResourceType.GROUP))
    c = Consumer(conf(broker, "alice", **{"group.id": group, "auto.offset.reset": "earliest"}))
    try:
        c.subscribe([topic])
        m = poll_until(c, lambda m: m.error() is None, "message")
        assert m.value() == b"g"
    finally:
        c.close()


def test_kafka_python_sees_the_same_refusals(broker):
    topic = unique("acl-kp")
    create_topic(broker, topic)
    kw = dict(bootstrap_servers=broker.kafka, security_protocol="SASL_PLAINTEXT",
              sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
              sasl_plain_password=USERS["alice"])
    p = kafka.KafkaProducer(max_block_ms=5000, **kw)
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            p.send(topic, b"kp").get(timeout=WAIT)
    finally:
        p.close(timeout=5)
    create_acls(broker, acl(topic, AclOperation.WRITE))
    p = kafka.KafkaProducer(max_block_ms=10000, **kw)
    try:
        assert p.send(topic, b"kp").get(timeout=WAIT).offset == 0
    finally:
        p.close(timeout=5)


def test_acls_survive_a_restart(tmp_path):
    n = make_broker(tmp_path / "data")
    n.start()
    try:
        topic = unique("acl-restart")
        create_topic(n, topic)
        binding = acl(topic, AclOperation.WRITE)
        create_acls(n, binding)
        n.restart()
        any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None,
                                      None, AclOperation.ANY, AclPermissionType.ANY)
        a = admin(n)
        assert a.describe_acls(any_filter).result(WAIT) == [binding]
        p = Producer(conf(n, "alice", **{"message.timeout.ms": 10000}))
        produce_until(p, topic, None)
    finally:
        n.stop()


JAVA_DIR = pathlib.Path(__file__).resolve().parents[1] / "kafka" / "java" / "target"


def test_java_admin_client_acls_and_producer(broker):
    """kafka-clients 4.3.1 (SCRAM-SHA-256): the AdminClient creates a prefixed ALLOW and a
    literal DENY for alice; her idempotent producer is refused, then succeeds on the same
    connection once the admin deletes the DENY. Built by tests/clients/kafka/setup.sh."""
    assert (JAVA_DIR / "classes" / "nagare" / "AclClientTest.class").is_file(), \
        "run tests/clients/kafka/setup.sh first"
    topic = unique("java-acl")
    r = subprocess.run(
        ["java", "-cp", f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*",
         "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "nagare.AclClientTest",
         broker.kafka, topic, "admin", USERS["admin"], "alice", USERS["alice"]],
        capture_output=True, timeout=120, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"OK refused {topic}" in r.stdout and "OK produced at offset 0" in r.stdout, r.stdout
