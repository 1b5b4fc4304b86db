"""npm @fluent-org/logger: every event mode with acks, and the shared-key handshake."""

import json
import os
import subprocess
import urllib.request

import pytest

from fwdutil import HERE, check_events, kafka_read, wait_log, write_config

NODE_SENDER = HERE / "node" / "send.js"


def run_node(nagare, tag, n, mode, *security, expect_ok=True, timeout_ms=25000):
    host, port = nagare.forward
    r = subprocess.run(
        ["node", str(NODE_SENDER), host, str(port), tag, str(n), mode, *security],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, SEND_TIMEOUT_MS=str(timeout_ms)),
    )
    if expect_ok:
        assert r.returncode == 0, r.stdout + r.stderr + nagare.read_log()
    return r


@pytest.mark.parametrize("mode", ["Message", "Forward", "PackedForward", "CompressedPackedForward"])
def test_node_logger_every_mode_with_ack(nagare, mode):
    tag = f"node.{mode.lower()}"
    n = 300
    run_node(nagare, tag, n, mode)
    check_events(kafka_read(nagare, tag, n), tag, n, prefix="node event")


def test_node_logger_shared_key_handshake(nagare_factory):
    nagare = nagare_factory(env={"NAGARE_FORWARD_SHARED_KEY": "s3cret",
                                 "NAGARE_FORWARD_SELF_HOSTNAME": "nagare-test"})
    n = 100
    run_node(nagare, "node.auth", n, "CompressedPackedForward", "s3cret", "client-host")
    check_events(kafka_read(nagare, "node.auth", n), "node.auth", n, prefix="node event")
    # A wrong key is refused: no ack ever comes, nothing is stored.
    r = run_node(nagare, "node.denied", 5, "PackedForward", "wrong", "client-host",
                 expect_ok=False, timeout_ms=3000)
    assert r.returncode != 0
    with urllib.request.urlopen(f"http://{nagare.http}/topics", timeout=5) as resp:
        assert "node.denied" not in [t["name"] for t in json.load(resp)]
    assert "shared_key mismatch" in wait_log(nagare, "shared_key mismatch")


def test_node_logger_handshake_with_user_authentication(nagare_factory, tmp_path):
    args = write_config(tmp_path, """
[forward]
shared_key = "k3y"
self_hostname = "nagare-users"

[[forward.user]]
username = "alice"
password = "wonderland"
""")
    nagare = nagare_factory(extra_args=args)
    n = 50
    run_node(nagare, "node.user", n, "PackedForward", "k3y", "client-host", "alice", "wonderland")
    check_events(kafka_read(nagare, "node.user", n), "node.user", n, prefix="node event")
    r = run_node(nagare, "node.baduser", 1, "PackedForward", "k3y", "client-host", "alice", "oops",
                 expect_ok=False, timeout_ms=3000)
    assert r.returncode != 0
    assert "username/password mismatch" in wait_log(nagare, "username/password mismatch")
