"""`nagare serve --auth required|none`, `--super-users`, `--allow-anonymous-remote`:
every listener demands a login when required, super users bypass ACLs, and anonymous
listeners reachable from other machines are refused unless explicitly allowed."""

import base64
import subprocess
import urllib.error
import urllib.request

import stomp

from conftest import BIN, Nagare


def add_user(data, name, password):
    subprocess.run([BIN, "user", "add", name, "--password", password, "--data-dir", str(data)],
                   capture_output=True, text=True, timeout=60, check=True)


def http_status(n, path, user=None, password=None):
    req = urllib.request.Request(f"http://{n.http}{path}")
    if user:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def stomp_connects(n, **kw):
    c = stomp.Connection12([n.stomp], heartbeats=(0, 0))
    try:
        c.connect(wait=True, **kw)
    except stomp.exception.ConnectFailedException:
        return False
    ok = c.is_connected()
    c.disconnect()
    return ok


def test_remote_bind_without_auth_is_refused_unless_allowed(tmp_path):
    args = [BIN, "serve", "--data-dir", str(tmp_path / "d"), "--kafka-listen", "0.0.0.0:0",
            "--stomp-listen", "127.0.0.1:0", "--forward-listen", "127.0.0.1:0",
            "--http-listen", "127.0.0.1:0"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "--allow-anonymous-remote" in r.stderr and "0.0.0.0" in r.stderr, r.stderr
    n = Nagare(tmp_path / "d2", ["--allow-anonymous-remote"])
    n.start(ports={"kafka": "0.0.0.0:0"})
    try:
        assert n.alive()
    finally:
        n.stop()


def test_auth_required_on_every_listener(tmp_path):
    data = tmp_path / "data"
    add_user(data, "admin", "admin-secret-1")
    add_user(data, "alice", "alice-secret-2")
    n = Nagare(data, ["--auth", "required", "--super-users", "admin"])
    n.start()
    try:
        log = n.read_log()
        assert "authentication required" in log
        # STOMP: a login is mandatory and checked.
        assert not stomp_connects(n)
        assert not stomp_connects(n, username="alice", passcode="wrong")
        assert stomp_connects(n, username="alice", passcode="alice-secret-2")
        # HTTP: credentials required; the super user may manage users, alice (no ACL,
        # deny by default when auth is required) may not.
        assert http_status(n, "/users") == 401
        assert http_status(n, "/users", "alice", "wrong") == 401
        assert http_status(n, "/users", "admin", "admin-secret-1") == 200
        assert http_status(n, "/users", "alice", "alice-secret-2") == 403
        r = subprocess.run([BIN, "user", "list", "--http", n.http, "--admin-user", "admin",
                            "--admin-password", "admin-secret-1"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and "alice" in r.stdout, r.stderr
        # The liveness probe stays open for orchestrators.
        assert http_status(n, "/healthz") == 200
    finally:
        n.stop()
