"""`nagare acl add|list|delete` through the HTTP admin API, and the ACLs they make
applied to a real client (stomp.py) on a broker demanding authentication."""

import subprocess
import uuid

import stomp

from conftest import BIN, Nagare


def run(*args, check=True):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60, check=check)


def acl(n, *args, check=True):
    return run("acl", "--http", n.http, "--admin-user", "admin", "--admin-password",
               "admin-secret-1", *args, check=check)


def stomp_send(n, user, password, dest):
    """True when the SEND is accepted (receipt), False when refused with an ERROR."""
    c = stomp.Connection12([n.stomp], heartbeats=(0, 0))
    errors = []

    class L(stomp.ConnectionListener):
        def on_error(self, frame):
            errors.append(frame)

    c.set_listener("l", L())
    c.connect(username=user, passcode=password, wait=True)
    receipt = uuid.uuid4().hex
    got = []

    class R(stomp.ConnectionListener):
        def on_receipt(self, frame):
            got.append(frame.headers.get("receipt-id"))

    c.set_listener("r", R())
    try:
        c.send(dest, "x", receipt=receipt)
    except stomp.exception.NotConnectedException:
        return False
    import time
    deadline = time.time() + 5
    while not got and not errors and time.time() < deadline:
        time.sleep(0.02)
    if c.is_connected():
        c.disconnect()
    return receipt in got and not errors


def test_acl_cli_drives_the_authorizer(tmp_path):
    data = tmp_path / "data"
    for name, pw in (("admin", "admin-secret-1"), ("alice", "alice-secret-2")):
        run("user", "add", name, "--password", pw, "--data-dir", str(data))
    n = Nagare(data, ["--auth", "required", "--super-users", "admin"])
    n.start()
    try:
        # No ACL: with authentication required, alice may do nothing.
        assert not stomp_send(n, "alice", "alice-secret-2", "/topic/orders")
        out = acl(n, "add", "--principal", "User:alice", "--operation", "write,read",
                  "--topic", "ord", "--prefixed").stdout
        assert "User:alice" in out and "prefixed" in out
        assert stomp_send(n, "alice", "alice-secret-2", "/topic/orders")
        # Deny wins over the prefixed allow.
        acl(n, "add", "--principal", "User:alice", "--operation", "write", "--topic",
            "orders", "--deny")
        assert not stomp_send(n, "alice", "alice-secret-2", "/topic/orders")
        assert stomp_send(n, "alice", "alice-secret-2", "/topic/ordinary")
        listed = acl(n, "list", "--principal", "User:alice").stdout
        assert listed.count("User:alice") == 3, listed
        assert "deny" in acl(n, "list", "--topic", "orders", "--pattern", "match").stdout
        out = acl(n, "delete", "--topic", "orders", "--permission", "deny").stdout
        assert "deleted 1" in out
        assert stomp_send(n, "alice", "alice-secret-2", "/topic/orders")
        # Mistakes get clear errors; alice herself may not manage ACLs.
        bad = acl(n, "add", "--principal", "alice", "--operation", "write", "--topic", "t",
                  check=False)
        assert bad.returncode != 0 and "User:NAME" in bad.stderr
        assert acl(n, "delete", check=False).returncode != 0
        r = run("acl", "--http", n.http, "--admin-user", "alice", "--admin-password",
                "alice-secret-2", "list", check=False)
        assert r.returncode != 0 and "403" in r.stderr
        # ACLs persist across a restart.
        n.restart()
        assert acl(n, "list").stdout.count("User:alice") == 2
    finally:
        n.stop()
