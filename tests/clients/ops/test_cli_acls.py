"""The groups, queues and status routes ask Kafka's ACLs: a user without rights sees no
group or queue and may not purge, reset or read the status; Describe on the queue's topic
shows it; a super user may do everything."""

import subprocess

import stomp

from conftest import BIN, Nagare
from cli_util import cli


def add_user(data, name, password):
    subprocess.run([BIN, "user", "add", name, "--password", password, "--data-dir", str(data)],
                   capture_output=True, text=True, timeout=60, check=True)


def as_user(n, user, password, *args, check=True):
    return cli(n, *args, "--user", user, "--password", password, check=check)


def test_groups_queues_and_status_follow_acls(tmp_path):
    data = tmp_path / "data"
    add_user(data, "admin", "admin-pw-1")
    add_user(data, "bob", "bob-pw-1")
    n = Nagare(data, ["--auth", "required", "--super-users", "admin"]).start()
    try:
        c = stomp.Connection12([n.stomp])
        c.connect("admin", "admin-pw-1", wait=True)
        c.send("/queue/secret", "x", headers={"receipt": "r"})
        c.disconnect(receipt="bye")

        anonymous = cli(n, "queue", "list", check=False)
        assert anonymous.returncode != 0 and "authentication" in anonymous.stderr
        assert "secret" in as_user(n, "admin", "admin-pw-1", "queue", "list").stdout

        bob = ("bob", "bob-pw-1")
        assert "secret" not in as_user(n, *bob, "queue", "list").stdout
        for args in (["queue", "purge", "secret"], ["queue", "describe", "secret"],
                     ["status"], ["group", "delete", "g"],
                     ["group", "reset-offsets", "g", "--topic", "queue.secret",
                      "--to-earliest", "--execute"]):
            p = as_user(n, *bob, *args, check=False)
            assert p.returncode != 0 and "403" in p.stderr, (args, p.stderr)

        cli(n, "acl", "add", "--principal", "User:bob", "--operation", "describe",
            "--topic", "queue.secret", "--admin-user", "admin", "--admin-password", "admin-pw-1")
        assert "secret" in as_user(n, *bob, "queue", "list").stdout
        assert as_user(n, *bob, "queue", "purge", "secret", check=False).returncode != 0
        assert "purged 1" in as_user(n, "admin", "admin-pw-1", "queue", "purge", "secret").stdout
        assert "uptime" in as_user(n, "admin", "admin-pw-1", "status", "--interval-ms", "0").stdout
    finally:
        n.stop()
