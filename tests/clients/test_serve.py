"""The `nagare serve` contract: listeners, /healthz, clean shutdown, restart."""

import os
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import BIN


def test_healthz_and_metrics(nagare):
    with urllib.request.urlopen(f"http://{nagare.http}/healthz", timeout=5) as r:
        assert r.status == 200
        assert r.read().strip() == b"ok"
    with urllib.request.urlopen(f"http://{nagare.http}/metrics", timeout=5) as r:
        assert r.status == 200


def test_every_listener_accepts(nagare):
    for name in ("kafka", "stomp", "forward", "http"):
        host, port = nagare.host_port(name)
        with socket.create_connection((host, port), timeout=5):
            pass


def test_startup_lines_name_listeners_data_dir_and_version(nagare):
    time.sleep(0.2)
    log = nagare.read_log()
    for name in ("kafka", "stomp", "forward", "http"):
        assert f"{name} listener on 127.0.0.1:" in log, log
    assert f"data directory {nagare.data_dir.resolve()}" in log, log
    # `nagare 0.1.0 (commit abc1234)`: the ready line names the same version and commit.
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("nagare "), version
    assert f"{version.strip()} ready" in log, log


def test_sigterm_stops_quickly_and_cleanly(nagare):
    t0 = time.time()
    assert nagare.stop() == 0
    assert time.time() - t0 < 5
    assert "stopped" in nagare.read_log()


def test_topics_survive_restart_with_their_ids(nagare):
    import json

    req = urllib.request.Request(
        f"http://{nagare.http}/topics",
        data=json.dumps({"name": "kept", "partitions": 3}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        created = json.load(r)
    nagare.restart()
    with urllib.request.urlopen(f"http://{nagare.http}/topics/kept", timeout=5) as r:
        again = json.load(r)
    assert again["id"] == created["id"]
    assert len(again["partitions"]) == 3


def test_bad_config_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_setting = 1\n")
    r = subprocess.run([BIN, "serve", "--config", str(bad), "--data-dir", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert "no_such_setting" in r.stderr


def _tree(path):
    """Every path under `path` with its size and modification time."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


def test_second_serve_on_one_data_dir_fails_fast_and_changes_nothing(nagare):
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": nagare.kafka, "acks": "all"})
    for i in range(100):
        p.produce("locked", f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0
    before = _tree(nagare.data_dir)

    t0 = time.time()
    r = subprocess.run(
        [BIN, "serve", "--data-dir", str(nagare.data_dir),
         "--kafka-listen", "127.0.0.1:0", "--stomp-listen", "127.0.0.1:0",
         "--forward-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert time.time() - t0 < 5
    assert str(nagare.data_dir) in r.stderr, r.stderr
    assert f"pid {nagare.proc.pid}" in r.stderr, r.stderr
    assert "ready" not in r.stderr
    after = _tree(nagare.data_dir)
    # The first broker may have touched its own files meanwhile; the second added nothing
    # and wrote no clean-shutdown marker.
    assert set(after) == set(before)
    assert not any(path.endswith(".nagare_cleanshutdown") for path in after)
    assert (nagare.data_dir / ".lock").read_text().strip() == str(nagare.proc.pid)

    # The first one keeps serving, and what it acknowledged survives its restart.
    for i in range(100, 200):
        p.produce("locked", f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0
    nagare.restart()
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition("locked", 0, 0)])
    got = []
    deadline = time.time() + 20
    while len(got) < 200 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(200)]


def test_data_dir_that_is_a_file_is_a_clear_error(tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("keep me\n")
    r = subprocess.run([BIN, "serve", "--data-dir", str(f), "--kafka-listen", "127.0.0.1:0",
                        "--stomp-listen", "127.0.0.1:0", "--forward-listen", "127.0.0.1:0",
                        "--http-listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert str(f) in r.stderr and "not a directory" in r.stderr, r.stderr
    assert f.read_text() == "keep me\n"


BAD_CONFIGS = [
    ("no_such_setting = 1\n", "unknown key `no_such_setting` in the top level"),
    ("[forward]\nsharedkey = \"secret\"\n",
     "unknown key `sharedkey` in [forward]; did you mean `shared_key`?"),
    ("[topics]\nretention_msec = 5\n",
     "unknown key `retention_msec` in [topics]; did you mean `retention_ms`?"),
    ("[kafka]\nmax_request_byte = 5\n",
     "unknown key `max_request_byte` in [kafka]; did you mean `max_request_bytes`?"),
    ("[stomp]\nheartbeat = 5\n", "unknown key `heartbeat` in [stomp]; did you mean `heartbeat_ms`?"),
    ("[http]\nlisen = \"127.0.0.1:0\"\n", "unknown key `lisen` in [http]; did you mean `listen`?"),
    ("[[forward.route]]\nmatch = \"a.**\"\n[[forward.route]]\nmatch = \"app.**\"\ntopik = \"t\"\n",
     "unknown key `topik` in [[forward.route]] #2 (\"app.**\"); did you mean `topic`?"),
    ("[[forward.route]]\nmatch = \"app.{x\"\n",
     "invalid `match` in [[forward.route]] #1 (match = \"app.{x\")"),
    ("[[forward.route]]\nmatch = \"app.**\"\ntopic = \"bad name\"\n",
     "invalid `topic` in [[forward.route]] #1 (match = \"app.**\")"),
    ("[topics]\nflush = \"sometimes\"\n", "expected acks, never, always or interval:<ms>"),
    ("[kafka]\nlisten = \"127.0.0.1:1\"\n[stomp]\nlisten = \"127.0.0.1:1\"\n",
     "[kafka] and [stomp] both listen on 127.0.0.1:1"),
    ("[kafka]\nlisten = \"not an address\"\n", "invalid value for `listen` in [kafka]"),
]


@pytest.mark.parametrize("text,message", BAD_CONFIGS, ids=[m.split(" in ")[0][:40] for _, m in BAD_CONFIGS])
def test_bad_config_exits_before_touching_anything(tmp_path, text, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    data = tmp_path / "data"
    # Fixed ports from the config (or these) would be bound if validation came too late;
    # port 1 cannot be bound without privileges, so a bind attempt would change the error.
    r = subprocess.run([BIN, "serve", "--config", str(cfg), "--data-dir", str(data)],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    # Said once, not once per cause.
    assert r.stderr.count(message) == 1, r.stderr
    assert not data.exists()
    assert "listener on" not in r.stderr and "ready" not in r.stderr


def test_unknown_nagare_variable_is_warned_about(nagare_factory):
    n = nagare_factory(env={"NAGARE_KAFKA_LISTN": "127.0.0.1:1"})
    time.sleep(0.2)
    log = n.read_log()
    assert "NAGARE_KAFKA_LISTN names no setting" in log, log
    assert "did you mean NAGARE_KAFKA_LISTEN?" in log, log


def _stomp_connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    return s


def _read_frame(s):
    """One frame's bytes up to its NUL, or b"" when the server closed the connection."""
    buf = b""
    while b"\x00" not in buf:
        try:
            chunk = s.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return b""
        if not chunk:
            return b""
        buf += chunk
    return buf


def test_connections_over_the_per_ip_limit_are_closed_and_counted(nagare_factory):
    n = nagare_factory(env={"NAGARE_LISTENERS_MAX_CONNECTIONS_PER_IP": "3"})
    kept = [_stomp_connect(n.ports["stomp"]) for _ in range(3)]
    for s in kept:
        assert _read_frame(s).startswith(b"CONNECTED"), "the first three are served"
    extra = [_stomp_connect(n.ports["stomp"]) for _ in range(2)]
    for s in extra:
        assert _read_frame(s) == b"", "over the limit: closed without a byte"
        s.close()
    for i, s in enumerate(kept):
        s.sendall(f"SEND\ndestination:/topic/limits\nreceipt:r{i}\n\nhello\x00".encode())
        assert _read_frame(s).startswith(b"RECEIPT"), "the first three keep working"
    with urllib.request.urlopen(f"http://{n.http}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    rejected = [
        line for line in metrics.splitlines()
        if line.startswith("nagare_connections_rejected_total{")
        and 'listener="stomp"' in line and 'reason="max_connections_per_ip"' in line
    ]
    assert rejected and rejected[0].split()[-1] == "2", metrics
    open_now = [
        line for line in metrics.splitlines()
        if line.startswith("nagare_connections_open{") and 'listener="stomp"' in line
    ]
    assert open_now and open_now[0].split()[-1] == "3", metrics
    for s in kept:
        s.close()
