"""Kafka SASL with real clients on a broker started with `--auth required`
(SASL_PLAINTEXT): PLAIN and SCRAM-SHA-256/512 with confluent-kafka (a modern librdkafka),
kafka-python, and kcat (PLAIN: Debian's librdkafka 2.0.2 has a SCRAM nonce Kafka 4
refuses); wrong passwords, unknown users, unknown mechanisms, no SASL at all and SASL
garbage each get a clear refusal and a closed connection while an authenticated client
goes on."""

import socket
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
import kafka
import kafka.errors

from conftest import BIN, Nagare

USERS = {"admin": "admin-secret-1", "alice": "alice-secret-2"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("sasl") / "data"
    for name, pw in USERS.items():
        subprocess.run([BIN, "user", "add", name, "--password", pw, "--data-dir", str(data)],
                       capture_output=True, text=True, timeout=60, check=True)
    # Everyone authenticated may do everything here: ACLs are tested elsewhere.
    n = Nagare(data, ["--auth", "required", "--super-users", "admin,alice"])
    n.start()
    yield n
    n.stop()


def conf(n, mechanism, user="alice", password=None, **extra):
    c = {"bootstrap.servers": n.kafka, "security.protocol": "SASL_PLAINTEXT",
         "sasl.mechanism": mechanism, "sasl.username": user,
         "sasl.password": USERS.get(user, "") if password is None else password}
    c.update(extra)
    return c


def round_trip(n, mechanism):
    topic = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    p = Producer(conf(n, mechanism))
    for i in range(20):
        p.produce(topic, value=b"m%d" % i)
    assert p.flush(20) == 0
    c = Consumer(conf(n, mechanism, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < 20 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"m%d" % i for i in range(20)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_confluent_kafka_round_trip(broker, mechanism):
    round_trip(broker, mechanism)


def refused(n, mechanism, user, password):
    """A client with bad credentials gets an authentication error, not a hang."""
    errors = []
    c = conf(n, mechanism, user=user, password=password,
             error_cb=lambda e: errors.append(e))
    a = AdminClient(c)
    with pytest.raises(KafkaException):
        a.list_topics(timeout=5)
    deadline = time.time() + 5
    while not errors and time.time() < deadline:
        a.poll(0.1)
    assert any("uthentication" in str(e) for e in errors), errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_and_unknown_user_are_refused(broker, mechanism):
    refused(broker, mechanism, "alice", "wrong")
    refused(broker, mechanism, "nobody", "x")
    # Meanwhile an authenticated client is untouched.
    round_trip(broker, mechanism)


def test_kafka_python_plain_and_scram(broker):
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        topic = f"kp-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
        kw = dict(bootstrap_servers=broker.kafka, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism=mechanism, sasl_plain_username="alice",
                  sasl_plain_password=USERS["alice"])
        p = kafka.KafkaProducer(**kw)
        for i in range(5):
            p.send(topic, b"kp%d" % i)
        p.flush()
        p.close()
        c = kafka.KafkaConsumer(topic, group_id="g-" + topic, auto_offset_reset="earliest",
                                consumer_timeout_ms=10000, **kw)
        got = [m.value for m in c]
        c.close()
        assert got == [b"kp%d" % i for i in range(5)]
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaProducer(bootstrap_servers=broker.kafka, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username="alice",
                            sasl_plain_password="wrong", max_block_ms=5000)


def test_kcat_plain(broker):
    topic = f"kcat-sasl-{uuid.uuid4().hex[:6]}"
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
            "-X", "sasl.username=alice", "-X", f"sasl.password={USERS['alice']}"]
    subprocess.run(["kcat", "-b", broker.kafka, "-P", "-t", topic, *sasl],
                   input="one\ntwo\n", text=True, check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", broker.kafka, "-C", "-t", topic, "-o", "beginning",
                          "-e", "-q", *sasl], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["one", "two"], out.stderr
    bad = subprocess.run(["kcat", "-b", broker.kafka, "-L", *sasl[:-1],
                          "sasl.password=wrong", "-m", "5"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "uthentication" in bad.stderr, bad.stderr


def frame(api_key, version, correlation, body, client=b"raw"):
    head = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
    if api_key == 36 and version >= 2 or api_key == 17 and False:
        head += b"\x00"
    payload = head + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(s):
    size = struct.unpack(">i", recv_exact(s, 4))[0]
    return recv_exact(s, size)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def closed(s):
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True


def raw(n):
    host, port = n.kafka.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def kstr(s):
    return struct.pack(">h", len(s)) + s


def test_raw_refusals_close_only_that_connection(broker):
    # Metadata (v1) before authenticating: the connection is closed.
    s = raw(broker)
    s.sendall(frame(3, 1, 1, struct.pack(">i", -1)))
    assert closed(s)
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM (33) with the list, then closed.
    s = raw(broker)
    s.sendall(frame(17, 1, 2, kstr(b"GSSAPI")))
    body = read_frame(s)
    assert struct.unpack(">ih", body[:6]) == (2, 33)
    assert b"SCRAM-SHA-512" in body
    assert closed(s)
    # SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE (34), closed.
    s = raw(broker)
    s.sendall(frame(36, 1, 3, struct.pack(">i", 3) + b"abc"))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (3, 34)
    assert closed(s)
    # Garbage in the SCRAM exchange: SASL_AUTHENTICATION_FAILED (58), closed.
    s = raw(broker)
    s.sendall(frame(17, 1, 4, kstr(b"SCRAM-SHA-256")))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (4, 0)
    s.sendall(frame(36, 1, 5, struct.pack(">i", 8) + b"\xff\x00garbag"))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (5, 58)
    assert closed(s)
    # A frame that is not Kafka at all.
    s = raw(broker)
    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert closed(s)
    round_trip(broker, "SCRAM-SHA-256")


def test_scram_credentials_through_the_admin_api(broker):
    """AlterUserScramCredentials (as kafka-configs / AdminClient do) adds a SCRAM user that
    can log in at once; DescribeUserScramCredentials lists it."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    a = AdminClient(conf(broker, "SCRAM-SHA-512", user="admin"))
    up = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                      b"carol-secret-3")
    for f in a.alter_user_scram_credentials([up]).values():
        f.result(10)
    # With named users confluent-kafka answers one future per user.
    described = {u: f.result(10)
                 for u, f in a.describe_user_scram_credentials(["carol"]).items()}
    info = described["carol"].scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in info] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    p = Producer(conf(broker, "SCRAM-SHA-256", user="carol", password="carol-secret-3"))
    p.produce("carol-topic", b"hi")
    assert p.flush(20) == 0
