"""`GET /connections` and `GET /forward/routes` with real clients: a Kafka client
(librdkafka) with a `client.id` logged in over SASL, a STOMP connection with a login and
a `client-id` header, a forward sender; each shows up with its protocol, peer, client id,
user and byte counts, and disappears once closed. The open/close lines are in the
debug log with the peer and the client id."""

import subprocess
import time
import urllib.error

import stomp
from confluent_kafka import Producer
from fluent import sender

from conftest import BIN
from metrics_util import get, get_json

PASSWORD = "alice-secret-1"
CONFIG = """
[[forward.route]]
match = "app.**"
topic = "app-logs"

[[forward.route]]
match = "noise"
drop = true
"""


def connections(nagare):
    return get_json(nagare, "/connections", user="alice", password=PASSWORD)


def wait_for(pred, what, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_connections_and_forward_routes(nagare_factory, tmp_path):
    data = tmp_path / "seed"
    subprocess.run([BIN, "user", "add", "alice", "--password", PASSWORD, "--data-dir",
                    str(data)], capture_output=True, text=True, timeout=60, check=True)
    nagare = nagare_factory(extra_args=["--auth", "required",
                                        "--super-users", "alice", "--log",
                                        "info,nagare_listener=debug"])
    # The factory made its own data dir: move the user store in by restarting on `data`.
    nagare.stop()
    nagare.data_dir = data
    nagare.start()

    p = Producer({"bootstrap.servers": nagare.kafka, "client.id": "orders-app",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": "alice", "sasl.password": PASSWORD})
    p.produce("c-topic", value=b"x" * 100)
    assert p.flush(20) == 0

    conn = stomp.Connection12([nagare.stomp], heartbeats=(0, 0))
    conn.connect("alice", PASSWORD, wait=True, headers={"client-id": "stomp-app"})

    def both():
        cs = connections(nagare)
        kafka = [c for c in cs if c["protocol"] == "kafka" and c["client_id"] == "orders-app"]
        st = [c for c in cs if c["protocol"] == "stomp" and c["user"] == "alice"]
        return (kafka, st, cs) if kafka and st else None

    kafka, st, cs = wait_for(both, "the kafka and stomp connections")
    for c in kafka:
        assert c["listener"] == "kafka"
        assert c["peer"].startswith("127.0.0.1:")
        assert c["user"] == "alice"
        assert c["opened_at_ms"] > 1_600_000_000_000
        assert c["bytes_in"] > 100 and c["bytes_out"] > 0
    (s,) = st
    assert s["client_id"] == "stomp-app"
    assert s["bytes_in"] > 0 and s["bytes_out"] > 0  # CONNECT in, CONNECTED out
    assert len({c["id"] for c in cs}) == len(cs)
    # The request itself is on the list, as an http connection.
    assert any(c["protocol"] == "http" for c in cs)

    # Cluster Describe is needed: no anonymous access, 401.
    try:
        get(nagare, "/connections")
        raise AssertionError("anonymous /connections answered")
    except urllib.error.HTTPError as e:
        assert e.code == 401

    # Closing makes the entries go away; the log has the open and close lines.
    conn.disconnect()
    del p
    wait_for(lambda: not [c for c in connections(nagare) if c["protocol"] == "stomp"],
             "the stomp connection to close")
    log = nagare.read_log()
    assert "connection opened" in log and "connection closed" in log
    assert "client_id=stomp-app" in log


def test_forward_routes_and_forward_connections(nagare_factory, tmp_path):
    cfg = tmp_path / "nagare.toml"
    cfg.write_text(CONFIG)
    nagare = nagare_factory(extra_args=["--config", str(cfg)])
    host, port = nagare.forward
    fwd = sender.FluentSender("app", host=host, port=port, timeout=10)
    try:
        assert fwd.emit("web", {"n": 1}), fwd.last_error
        assert fwd.emit("web", {"n": 2}), fwd.last_error
        routes = wait_for(
            lambda: (r := get_json(nagare, "/forward/routes")) and r[0]["events"] == 2 and r,
            "two events on the app route")
        assert [r["pattern"] for r in routes] == ["app.**", "noise", "(unmatched)"]
        app = routes[0]
        assert app["topic"] == "app-logs" and not app["drop"]
        assert app["bytes"] > 0 and app["dead_lettered"] == 0
        assert routes[1]["drop"] and routes[1]["topic"] is None
        assert routes[2]["events"] == 0
        (f,) = [c for c in get_json(nagare, "/connections") if c["protocol"] == "forward"]
        assert f["listener"] == "forward" and f["bytes_in"] > 0 and f["user"] is None
    finally:
        fwd.close()
