"""TLS on every listener with real clients and real certificates (made by
`nagare tls self-signed`, plus expired ones made here): Kafka SSL with a client
certificate (kcat), SASL_SSL + SCRAM-SHA-512 and SASL_PLAINTEXT + PLAIN on a second,
plain listener (confluent-kafka), STOMP over TLS with login/passcode (stomp.py and the Ruby
gem), forward over TLS with a user (@fluent-org/logger) and without (fluent-logger-golang),
HTTPS for the admin CLI; wrong CAs, expired certificates and plaintext to a TLS port each
fail cleanly while other connections go on; SIGHUP swaps the certificate without dropping
connections."""

import datetime
import os
import pathlib
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest
import stomp
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from conftest import BIN, Nagare

HERE = pathlib.Path(__file__).resolve().parent
CLIENTS = HERE.parent
RUBY = CLIENTS / "stomp" / "stomp_ruby.rb"
NODE_SENDER = CLIENTS / "forward" / "node" / "send.js"
GO_SENDER = CLIENTS / "forward" / "go" / "forwardsender"

USERS = {"admin": "admin-secret-1", "alice": "alice-secret-2"}


def run(*args, **kw):
    kw.setdefault("timeout", 60)
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def self_signed(out, *clients):
    extra = [x for c in clients for x in ("--client", c)]
    r = run(BIN, "tls", "self-signed", "--out", out, "--force", *extra)
    assert r.returncode == 0, r.stderr
    return pathlib.Path(out)


def expired_cert(certs, cn, out, server=False):
    """A certificate signed by the CA in `certs` that expired yesterday."""
    ca = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((certs / "ca-key.pem").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
         .issuer_name(ca.subject).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(days=30))
         .not_valid_after(now - datetime.timedelta(days=1)))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]),
            critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    out = pathlib.Path(out)
    (out.parent / (out.name + ".pem")).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out.parent / (out.name + "-key.pem")).write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return out.parent / (out.name + ".pem"), out.parent / (out.name + "-key.pem")


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    root = tmp_path_factory.mktemp("tls")
    certs = self_signed(root / "certs", "alice", "mallory")
    data = root / "data"
    for name, pw in USERS.items():
        r = run(BIN, "user", "add", name, "--password", pw, "--forward", "--data-dir", data)
        assert r.returncode == 0, r.stderr
    config = root / "nagare.toml"
    config.write_text(f"""
[tls]
client_ca = "{certs / 'ca.pem'}"

# A plain (SASL_PLAINTEXT) Kafka listener beside the TLS one.
[[kafka.listeners]]
listen = "127.0.0.1:0"
tls = false

# A forward listener for senders that cannot log in (TLS, no authentication).
[[forward.listeners]]
listen = "127.0.0.1:0"
auth = "none"
""")
    n = Nagare(data, ["--config", config, "--tls-cert", certs / "server.pem",
                      "--tls-key", certs / "server-key.pem", "--auth", "required",
                      "--super-users", "admin,alice"])
    n.start()
    n.certs = certs
    n.root = root
    yield n
    n.stop()


def sasl_ssl(n, mechanism="SCRAM-SHA-512", user="alice", password=None, ca=None, **extra):
    c = {"bootstrap.servers": n.kafka, "security.protocol": "SASL_SSL",
         "ssl.ca.location": str(ca or n.certs / "ca.pem"),
         "sasl.mechanism": mechanism, "sasl.username": user,
         "sasl.password": USERS.get(user, "") if password is None else password}
    c.update(extra)
    return c


def round_trip(conf, topic, count=50):
    p = Producer(dict(conf, **{"acks": "all"}))
    for i in range(count):
        p.produce(topic, value=b"tls-%d" % i)
    assert p.flush(30) == 0
    c = Consumer(dict(conf, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"tls-%d" % i for i in range(count)]


def fails_to_connect(conf, expect):
    """An AdminClient with this configuration cannot reach the broker; its errors name
    `expect` (a handshake or authentication failure), and it gives up promptly."""
    errors = []
    a = AdminClient(dict(conf, error_cb=lambda e: errors.append(str(e))))
    with pytest.raises(KafkaException):
        a.list_topics(timeout=6)
    deadline = time.time() + 5
    while not any(expect in e for e in errors) and time.time() < deadline:
        a.poll(0.1)
    assert any(expect in e for e in errors), errors


def test_confluent_sasl_ssl_scram_sha_512(tls_broker):
    round_trip(sasl_ssl(tls_broker), f"tls-scram-{uuid.uuid4().hex[:6]}")


def test_confluent_sasl_plaintext_plain_on_the_plain_listener(tls_broker):
    conf = {"bootstrap.servers": tls_broker.ports["kafka.1"],
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": USERS["alice"]}
    round_trip(conf, f"tls-plain-{uuid.uuid4().hex[:6]}")


def kcat_ssl(n, *extra):
    return ["kcat", "-b", n.kafka, "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={n.certs / 'ca.pem'}", *extra]


def test_kcat_ssl_with_a_client_certificate(tls_broker):
    """A verified client certificate logs the connection in as User:<CN>: no SASL needed."""
    n, certs = tls_broker, tls_broker.certs
    cert = ["-X", f"ssl.certificate.location={certs / 'alice.pem'}",
            "-X", f"ssl.key.location={certs / 'alice-key.pem'}"]
    topic = f"tls-kcat-{uuid.uuid4().hex[:6]}"
    r = run(*kcat_ssl(n, *cert), "-P", "-t", topic, input="one\ntwo\n")
    assert r.returncode == 0, r.stderr
    r = run(*kcat_ssl(n, *cert), "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert r.stdout.split() == ["one", "two"], r.stderr
    # Without a certificate (and no SASL) the broker demands a login: refused.
    r = run(*kcat_ssl(n), "-L", "-m", "5")
    assert r.returncode != 0 or "tls-kcat" not in r.stdout


def test_wrong_password_over_sasl_ssl_is_refused(tls_broker):
    fails_to_connect(sasl_ssl(tls_broker, password="wrong"), "uthentication")


def test_untrusted_and_expired_certificates(tls_broker):
    n = tls_broker
    other = self_signed(n.root / "other-ca")
    # The client trusts another CA: its handshake fails, it says so.
    fails_to_connect(sasl_ssl(n, ca=other / "ca.pem"), "SSL")
    # An expired client certificate is refused by the server's handshake.
    cert, key = expired_cert(n.certs, "alice", n.root / "expired-alice")
    ctx = ssl.create_default_context(cafile=str(n.certs / "ca.pem"))
    ctx.load_cert_chain(str(cert), str(key))
    host, port = n.kafka.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                # TLS 1.3: the server's verdict on the certificate arrives with the
                # first read.
                s.sendall(api_versions_frame())
                s.settimeout(5)
                if not s.recv(4):
                    raise ConnectionError("closed")
    assert "TLS handshake failed" in n.read_log()
    # The broker is fine for everyone else.
    round_trip(sasl_ssl(n), f"tls-after-bad-{uuid.uuid4().hex[:6]}", count=5)


def api_versions_frame():
    body = struct.pack(">hhih", 18, 0, 1, 3) + b"raw"
    return struct.pack(">i", len(body)) + body


def test_plaintext_to_a_tls_port_is_closed_while_others_go_on(tls_broker):
    n = tls_broker
    p = Producer(sasl_ssl(n, **{"acks": "all"}))
    topic = f"tls-steady-{uuid.uuid4().hex[:6]}"
    p.produce(topic, b"before")
    assert p.flush(30) == 0
    for name in ("kafka", "stomp", "forward", "http"):
        host, port = n.ports[name].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(api_versions_frame() if name == "kafka" else b"CONNECT\n\n\x00")
            s.settimeout(5)
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            # Whatever comes back is a TLS alert at most, never a protocol answer.
            assert not data or data[0] == 0x15, (name, data[:20])
    # The TLS producer connected before is untouched.
    p.produce(topic, b"after")
    assert p.flush(30) == 0


def stomp_tls(n, login, passcode):
    host, port = n.ports["stomp"].rsplit(":", 1)
    c = stomp.Connection12([(host, int(port))], heartbeats=(0, 0))
    c.set_ssl(for_hosts=[(host, int(port))], ca_certs=str(n.certs / "ca.pem"))
    got, errors = [], []

    class L(stomp.ConnectionListener):
        def on_message(self, frame):
            got.append(frame.body)

        def on_error(self, frame):
            errors.append(frame)
    c.set_listener("l", L())
    return c, got, errors


def test_stomp_py_over_tls_with_login(tls_broker):
    c, got, _ = stomp_tls(tls_broker, "alice", USERS["alice"])
    c.connect("alice", USERS["alice"], wait=True)
    q = f"/queue/tls-{uuid.uuid4().hex[:6]}"
    c.subscribe(q, id="1", ack="auto")
    for i in range(20):
        c.send(q, f"m{i}")
    deadline = time.time() + 10
    while len(got) < 20 and time.time() < deadline:
        time.sleep(0.05)
    c.disconnect()
    assert got == [f"m{i}" for i in range(20)]
    # A wrong passcode: an ERROR frame, and no session.
    c, _, errors = stomp_tls(tls_broker, "alice", "wrong")
    with pytest.raises(stomp.exception.ConnectFailedException):
        c.connect("alice", "wrong", wait=True)
    assert errors and "Authentication failed" in errors[0].headers.get("message", "")


def ruby(n, scenario, *args):
    host, port = n.ports["stomp"].rsplit(":", 1)
    r = run("ruby", RUBY, host, port, "1.2", scenario, *args,
            env=dict(os.environ, STOMP_TLS_CA=str(n.certs / "ca.pem")))
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}\n{n.read_log()}"
    assert f"OK {scenario}" in r.stdout


def test_ruby_stomp_over_tls_with_login(tls_broker):
    ruby(tls_broker, "login", "alice", USERS["alice"])
    ruby(tls_broker, "login_refused", "alice", "wrong")


def read_topic(n, topic, count):
    c = Consumer(sasl_ssl(n, **{"group.id": "r-" + uuid.uuid4().hex[:6],
                                "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got, deadline = [], time.time() + 30
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def test_forward_over_tls_with_a_user(tls_broker):
    """@fluent-org/logger over TLS, with the handshake as a user of the store."""
    n = tls_broker
    host, port = n.ports["forward"].rsplit(":", 1)
    tag = f"fwd.tls.{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, SEND_TLS_CA=str(n.certs / "ca.pem"), SEND_TIMEOUT_MS="25000")
    r = run("node", NODE_SENDER, host, port, tag, 100, "PackedForward", "", "tls-client",
            "alice", USERS["alice"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr + n.read_log()
    assert len(read_topic(n, tag, 100)) == 100
    env["SEND_TIMEOUT_MS"] = "3000"
    r = run("node", NODE_SENDER, host, port, tag + ".bad", 1, "PackedForward", "", "tls-client",
            "alice", "wrong", env=env)
    assert r.returncode != 0


def test_forward_over_tls_with_fluent_logger_golang(tls_broker):
    """fluent-logger-golang cannot log in: it uses the anonymous TLS listener, where an ACL
    (made over HTTPS with the CLI) lets anonymous senders write `fwd.go.*` topics only."""
    n = tls_broker
    host, port = n.ports["forward.1"].rsplit(":", 1)
    tag = f"fwd.go.tls.{uuid.uuid4().hex[:6]}"
    r = run(GO_SENDER, host, port, "denied." + tag, 1, "ack",
            env=dict(os.environ, FORWARD_TLS="1", SSL_CERT_FILE=str(n.certs / "ca.pem")))
    assert r.returncode != 0
    r = run(BIN, "acl", "add", "--http", "https://" + n.ports["http"], "--ca", n.certs / "ca.pem",
            "--admin-user", "admin", "--admin-password", USERS["admin"],
            "--principal", "User:ANONYMOUS", "--operation", "write,create", "--topic", "fwd.go.",
            "--prefixed")
    assert r.returncode == 0, r.stderr
    r = run(GO_SENDER, host, port, tag, 50, "ack",
            env=dict(os.environ, FORWARD_TLS="1", SSL_CERT_FILE=str(n.certs / "ca.pem")))
    assert r.returncode == 0, r.stdout + r.stderr + n.read_log()
    assert len(read_topic(n, tag, 50)) == 50


def test_https_admin_api(tls_broker):
    n = tls_broker
    url = "https://" + n.ports["http"]
    r = run(BIN, "user", "list", "--http", url, "--ca", n.certs / "ca.pem",
            "--admin-user", "admin", "--admin-password", USERS["admin"])
    assert r.returncode == 0 and "alice" in r.stdout, r.stderr
    # Without the CA the certificate is not trusted: a clear error, no hang.
    r = run(BIN, "user", "list", "--http", url, "--admin-user", "admin",
            "--admin-password", USERS["admin"], timeout=30)
    assert r.returncode != 0


def test_sighup_reloads_the_certificate_without_dropping_connections(tmp_path):
    certs = self_signed(tmp_path / "certs")
    n = Nagare(tmp_path / "data", ["--tls-cert", certs / "server.pem",
                                    "--tls-key", certs / "server-key.pem"])
    n.start()
    try:
        old_ca = tmp_path / "old-ca.pem"
        old_ca.write_bytes((certs / "ca.pem").read_bytes())
        n.certs = certs
        # A STOMP subscriber connected with the old certificate.
        c, got, _ = stomp_tls(n, "", "")
        c.set_ssl(for_hosts=[n.host_port("stomp")], ca_certs=str(old_ca))
        c.connect(wait=True)
        c.subscribe("/topic/reload", id="1", ack="auto")
        # New CA and certificate in the same files, then SIGHUP.
        self_signed(certs)
        n.proc.send_signal(__import__("signal").SIGHUP)
        deadline = time.time() + 10
        while "TLS certificate reloaded" not in n.read_log() and time.time() < deadline:
            time.sleep(0.05)
        assert "TLS certificate reloaded" in n.read_log()
        # New connections get the new certificate: the old CA no longer verifies it...
        conf = {"bootstrap.servers": n.kafka, "security.protocol": "SSL"}
        fails_to_connect(dict(conf, **{"ssl.ca.location": str(old_ca)}), "SSL")
        # ...the new one does.
        p = Producer(dict(conf, **{"ssl.ca.location": str(certs / "ca.pem")}))
        p.produce("reload", b"via kafka")
        assert p.flush(30) == 0
        # And the subscriber connected before the reload still receives.
        deadline = time.time() + 10
        while not got and time.time() < deadline:
            time.sleep(0.05)
        assert got == ["via kafka"]
        c.disconnect()
        # A broken file on the next SIGHUP keeps the current certificate.
        (certs / "server.pem").write_text("not a certificate")
        n.proc.send_signal(__import__("signal").SIGHUP)
        deadline = time.time() + 10
        while "not reloaded" not in n.read_log() and time.time() < deadline:
            time.sleep(0.05)
        assert "not reloaded" in n.read_log()
        p = Producer(dict(conf, **{"ssl.ca.location": str(certs / "ca.pem")}))
        p.produce("reload", b"still")
        assert p.flush(30) == 0
    finally:
        n.stop()


def test_bad_tls_settings_are_refused_at_startup(tmp_path):
    certs = self_signed(tmp_path / "certs")
    r = run(BIN, "serve", "--data-dir", tmp_path / "d", "--tls-cert", certs / "server.pem")
    assert r.returncode != 0 and "both a certificate and a key" in r.stderr
    r = run(BIN, "serve", "--data-dir", tmp_path / "d", "--tls-cert", certs / "server.pem",
            "--tls-key", certs / "ca-key.pem", "--kafka-listen", "127.0.0.1:0",
            "--stomp-listen", "127.0.0.1:0", "--forward-listen", "127.0.0.1:0",
            "--http-listen", "127.0.0.1:0")
    assert r.returncode != 0 and "does not go with the certificate" in r.stderr, r.stderr
    r = run(BIN, "serve", "--data-dir", tmp_path / "d", "--tls-cert", tmp_path / "missing.pem",
            "--tls-key", certs / "server-key.pem", "--kafka-listen", "127.0.0.1:0",
            "--stomp-listen", "127.0.0.1:0", "--forward-listen", "127.0.0.1:0",
            "--http-listen", "127.0.0.1:0")
    assert r.returncode != 0 and "missing.pem" in r.stderr, r.stderr
