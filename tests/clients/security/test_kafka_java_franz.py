"""Kafka SASL over TLS with two more real clients, against one broker started with TLS
(`nagare tls self-signed` certificates), `--auth required` and a second, plaintext Kafka
listener (`kafka.1`, SASL_PLAINTEXT):

- the Apache Kafka Java client (kafka-clients 4.3.1) over SASL_SSL with SCRAM-SHA-256 and
  the CA as a PEM truststore: idempotent acks=all produce, a consumer group reading the
  records back (on the TLS listener and on the plaintext one), wrong passwords and unknown
  users refused promptly with SaslAuthenticationException, an untrusted CA refused with
  SslAuthenticationException;
- franz-go's own pkg/kgo test suite (the binary `scripts/compat/franz-go` builds, version
  pinned there) over SASL_SSL with SCRAM-SHA-512: the produce, consume, group and client
  tests listed in KGO_TESTS.

Both are built by setup.sh; here they are only run. Left out of the kgo run, and why:
  TestTxnEtl                transactions: the whole suite, this test included, runs on a
                            plaintext listener in ecosystem/test_franz_go.py; here the
                            point is SASL_SSL, and it would add minutes
  TestIssue769              uses its own Dialer, which kgo refuses together with TLS: it
                            runs on the SASL_PLAINTEXT listener instead (KGO_PLAINTEXT_TESTS)
  share group, KIP-848, OAUTHBEARER and "broker too old" tests skip themselves on nagare
  (no ShareFetch, no ConsumerGroupHeartbeat, no OAUTHBEARER), so they are not listed.
"""

import os
import pathlib
import re
import subprocess
import uuid

import pytest

from conftest import BIN, Nagare

HERE = pathlib.Path(__file__).resolve().parent
JAVA_DIR = HERE / "java" / "target"
CLASSPATH = f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*"
KGO_BUILD = HERE / "go" / "build"

USERS = {"java": "java-scram-secret-1", "kgo": "kgo-scram-secret-2"}
# Not a super user: what she may do comes from ACLs.
CAROL = "carol-scram-secret-3"

# franz-go kgo tests that pass against nagare over SASL_SSL + SCRAM-SHA-512.
KGO_TESTS = [
    "TestPing",
    "TestIssue1034",
    "TestUnknownGroupOffsetFetchPinned",
    "TestSCRAMAuth",  # on KGO_TEST_SCRAM_SEEDS: the SASL_PLAINTEXT listener
    "TestSCRAMAuthBadCredentials",
    "TestIssue325",
    "TestConsumeTopicRetrieval",
    "TestConsumeTopicRetrieval_Many",
    "TestIssue337",
    "TestDirectPartitionPurge",
    "TestIssue434",
    "TestAddRemovePartitions",
    "TestPauseIssue489",
    "TestPauseIssueOct2023",
    "TestIssue523",
    "TestIssue648",
    "TestIssue810",
    "TestIssue865",
    "TestIssueFetchLargerThanBrokerMaxReadBytes",
    "TestPooling",
    "TestGroupSimple",
    "TestHookPollStart",
    "TestConsumeMaxDecompressBatchBytes",
    "TestGroupETL",
    "TestClient_Produce",
    "TestIssueProduceSyncManualPartitionNegativeDoesNotPanic",
    "TestIssue831",
    "TestClient_ProduceLargeMessages",
    "TestConsumeRegex",  # __consumer_offsets in Metadata with is_internal, skipped by regex
]
# Tests that set their own Dialer (kgo refuses a Dialer together with TLS).
KGO_PLAINTEXT_TESTS = ["TestIssue769"]


def run(*args, **kw):
    kw.setdefault("timeout", 60)
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    """A broker with TLS on every listener, SASL required, and a plaintext Kafka listener."""
    base = tmp_path_factory.mktemp("sasl-ssl")
    certs = base / "tls"
    r = run(BIN, "tls", "self-signed", "--out", certs)
    assert r.returncode == 0, r.stderr
    other = base / "other-ca"
    r = run(BIN, "tls", "self-signed", "--out", other)
    assert r.returncode == 0, r.stderr
    data = base / "data"
    for name, pw in list(USERS.items()) + [("carol", CAROL)]:
        r = run(BIN, "user", "add", name, "--password", pw, "--data-dir", data)
        assert r.returncode == 0, r.stderr
    config = base / "nagare.toml"
    config.write_text('[[kafka.listeners]]\nlisten = "127.0.0.1:0"\ntls = false\n')
    # Everyone authenticated may do everything: ACLs are tested elsewhere.
    n = Nagare(data, ["--auth", "required", "--super-users", ",".join(USERS),
                      "--tls-cert", str(certs / "server.pem"),
                      "--tls-key", str(certs / "server-key.pem"), "--config", str(config)])
    n.start()
    assert "kafka.1" in n.ports, n.ports
    n.certs, n.other_ca = certs, other / "ca.pem"
    yield n
    n.stop()


def java(*args, timeout=90):
    assert (JAVA_DIR / "lib").is_dir() and (JAVA_DIR / "classes").is_dir(), \
        "run tests/clients/security/setup.sh first"
    r = subprocess.run(
        ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "nagare.SaslSslClientTest", *[str(a) for a in args]],
        capture_output=True, timeout=timeout, text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    return r.stdout


def sasl_ssl(n, user="java", password=None, ca=None):
    return [n.kafka, "SASL_SSL", ca or n.certs / "ca.pem", user,
            USERS[user] if password is None else password]


def test_java_scram_sha256_over_sasl_ssl_round_trip(secure):
    topic = f"java-sasl-ssl-{uuid.uuid4().hex[:6]}"
    assert "OK produced 500" in java("produce", *sasl_ssl(secure), topic, 500)
    out = java("consume", *sasl_ssl(secure), topic, 500, "g-ssl-" + topic)
    assert "OK consumed 500 in group" in out and "committed offsets sum 500" in out, out
    # The same log through the SASL_PLAINTEXT listener, with another group.
    out = java("consume", secure.ports["kafka.1"], "SASL_PLAINTEXT", "-", "java",
               USERS["java"], topic, 500, "g-plain-" + topic)
    assert "OK consumed 500 in group" in out, out


def refused_secs(out, expected):
    m = re.search(rf"OK refused with {expected} after ([0-9.]+) s", out)
    assert m, out
    return float(m.group(1))


@pytest.mark.parametrize("user,password", [("java", "wrong-password"), ("nobody", "x")])
def test_java_bad_credentials_refused_promptly(secure, user, password):
    args = [secure.kafka, "SASL_SSL", secure.certs / "ca.pem", user, password]
    out = java("refused", *args, "SaslAuthenticationException", timeout=60)
    # Refused at once, not after max.block.ms (15 s) of retries.
    assert refused_secs(out, "SaslAuthenticationException") < 10, out
    assert "Authentication failed" in out, out


def test_java_untrusted_ca_refused(secure):
    out = java("refused", *sasl_ssl(secure, ca=secure.other_ca), "SslAuthenticationException",
               timeout=60)
    assert refused_secs(out, "SslAuthenticationException") < 10, out
    # The broker goes on serving clients that trust it.
    topic = f"java-after-bad-ca-{uuid.uuid4().hex[:6]}"
    assert "OK produced 20" in java("produce", *sasl_ssl(secure), topic, 20)


def kgo(n, tests, seeds, tls, timeout):
    dirs = sorted(KGO_BUILD.glob("franz-go@*/pkg/kgo"))
    binary = KGO_BUILD / "kgo.test"
    assert dirs and binary.is_file(), "run tests/clients/security/setup.sh first"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGO_")}
    env.update({
        "KGO_SEEDS": seeds,
        "KGO_TEST_SCRAM": f"kgo:{USERS['kgo']}:512",
        "KGO_TEST_SCRAM_ALL": "1",  # setup.sh's one-line addition: SASL for every client
        "KGO_TEST_SCRAM_SEEDS": n.ports["kafka.1"],
        "KGO_TEST_RF": "1",
        "KGO_TEST_RECORDS": "20000",
    })
    if tls:
        env["KGO_TEST_TLS"] = f"ca:{n.certs / 'ca.pem'}"
    pattern = "^(" + "|".join(tests) + ")$"
    log = n.data_dir.parent / f"kgo-{'tls' if tls else 'plain'}.log"
    with open(log, "w") as f:
        try:
            r = subprocess.run([binary, "-test.run", pattern, "-test.count=1", "-test.v",
                                f"-test.timeout={timeout}s"],
                               cwd=dirs[-1], env=env, stdout=f, stderr=subprocess.STDOUT,
                               timeout=timeout + 30)
            code = r.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    out = log.read_text(errors="replace")
    # Test lines without the clients' own log lines ("[hh:mm:ss ...] ...").
    summary = "\n".join(line for line in out.splitlines() if not line.startswith("["))
    detail = f"go test exit {code}\n{summary[-12000:]}\nbroker log:\n{n.read_log()[-3000:]}"
    assert code == 0 and re.search(r"^PASS$", out, re.M), detail
    for t in tests:
        # Every listed test ran and passed (a skip would hide a regression).
        assert re.search(rf"^--- PASS: {re.escape(t)} \(", out, re.M), f"{t} did not pass\n{detail}"
    return out


def test_franz_go_kgo_suite_over_sasl_ssl_scram_sha512(secure):
    kgo(secure, KGO_TESTS, secure.kafka, tls=True, timeout=180)


def test_franz_go_kgo_dialer_tests_over_sasl_plaintext(secure):
    kgo(secure, KGO_PLAINTEXT_TESTS, secure.ports["kafka.1"], tls=False, timeout=60)


def acl_tool(n, tmp_path, *args):
    """Kafka's own ACL tool (org.apache.kafka.tools.AclCommand, kafka-tools 4.3.1) as the
    super user `java` over SASL_SSL."""
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="java" password="{USERS["java"]}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={n.certs / 'ca.pem'}\n")
    r = subprocess.run(["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                        "org.apache.kafka.tools.AclCommand", "--bootstrap-server", n.kafka,
                        "--command-config", str(props), *args],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    return r.stdout


def carol_produces(n, topic):
    """Whether carol (SCRAM-SHA-256 over SASL_SSL, confluent-kafka) may write `topic`."""
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": n.kafka, "security.protocol": "SASL_SSL",
                  "ssl.ca.location": str(n.certs / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-256",
                  "sasl.username": "carol", "sasl.password": CAROL,
                  "message.timeout.ms": 8000})
    p.produce(topic, b"from carol", on_delivery=lambda err, _m: errors.append(err))
    p.flush(15)
    assert len(errors) == 1
    return errors[0] is None


def test_kafkas_own_acl_tool(secure, tmp_path):
    topic = f"acl-tool-{uuid.uuid4().hex[:6]}"
    assert not carol_produces(secure, topic)
    acl_tool(secure, tmp_path, "--add", "--allow-principal", "User:carol",
             "--operation", "Write", "--operation", "Create", "--operation", "Describe",
             "--topic", topic)
    listed = acl_tool(secure, tmp_path, "--list", "--topic", topic)
    assert "User:carol" in listed and "WRITE" in listed and "ALLOW" in listed, listed
    assert carol_produces(secure, topic)
    acl_tool(secure, tmp_path, "--remove", "--force", "--allow-principal", "User:carol",
             "--operation", "Write", "--operation", "Create", "--operation", "Describe",
             "--topic", topic)
    assert "User:carol" not in acl_tool(secure, tmp_path, "--list", "--topic", topic)
    assert not carol_produces(secure, topic)
