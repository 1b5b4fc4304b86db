"""`nagare user add|list|delete`: offline on a stopped broker's data directory, and
online through the HTTP admin API of a running one. Passwords never appear in output."""

import json
import subprocess
import urllib.request

from conftest import BIN, Nagare


def user(*args, input=None, check=True):
    return subprocess.run([BIN, "user", *args], capture_output=True, text=True, input=input,
                          timeout=60, check=check)


def listed(*args):
    out = user("list", "--output", "json", *args).stdout
    return {u["name"]: u for u in json.loads(out)}


def test_offline_add_list_delete_then_serve(tmp_path):
    data = tmp_path / "data"
    out = user("add", "alice", "--password", "alice-secret-1", "--data-dir", str(data))
    assert "alice" in out.stdout and "alice-secret-1" not in out.stdout + out.stderr
    user("add", "fwd", "--password", "fwd-secret-2", "--forward", "--data-dir", str(data))
    user("add", "carol", "--password-stdin", "--data-dir", str(data), input="carol-secret-3\n")
    users = listed("--data-dir", str(data))
    assert set(users) == {"alice", "fwd", "carol"}
    assert users["alice"]["plain"] and not users["alice"]["forward"]
    assert users["fwd"]["forward"]
    assert sorted(s["mechanism"] for s in users["alice"]["scram"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert all(s["iterations"] == 4096 for s in users["alice"]["scram"])
    table = user("list", "--data-dir", str(data)).stdout
    assert "alice" in table and "SCRAM-SHA-512" in table
    user("delete", "carol", "--data-dir", str(data))
    missing = user("delete", "carol", "--data-dir", str(data), check=False)
    assert missing.returncode != 0 and "no user" in missing.stderr
    # No password is stored in clear outside the forward secrets.
    for f in (data / "__nagare_users-0").iterdir():
        blob = f.read_bytes()
        for pw in (b"alice-secret-1", b"fwd-secret-2", b"carol-secret-3"):
            assert pw not in blob
    # The broker started on that directory has the users.
    n = Nagare(data)
    n.start()
    try:
        with urllib.request.urlopen(f"http://{n.http}/users", timeout=5) as r:
            names = {u["name"] for u in json.load(r)}
        assert names == {"alice", "fwd"}
    finally:
        n.stop()


def test_offline_refused_while_the_broker_runs(nagare):
    r = user("list", "--data-dir", str(nagare.data_dir), check=False)
    assert r.returncode != 0
    assert "drop --data-dir" in r.stderr


def test_online_add_list_delete(nagare):
    http = ["--http", nagare.http]
    out = user("add", "bob", "--password", "bob-secret-4", *http)
    assert "bob-secret-4" not in out.stdout + out.stderr
    user("add", "dave", "--password", "dave-secret-5", "--forward", *http)
    users = listed(*http)
    assert set(users) == {"bob", "dave"} and users["dave"]["forward"]
    # Re-adding replaces the password (and drops the forward secret without --forward).
    user("add", "dave", "--password", "dave-secret-6", *http)
    assert not listed(*http)["dave"]["forward"]
    user("delete", "bob", *http)
    assert set(listed(*http)) == {"dave"}
    gone = user("delete", "bob", *http, check=False)
    assert gone.returncode != 0 and "404" in gone.stderr
    bad = user("add", "*", "--password", "x", *http, check=False)
    assert bad.returncode != 0 and "400" in bad.stderr
    assert "bob-secret-4" not in nagare.read_log()
    assert "dave-secret" not in nagare.read_log()
    # Survives a restart.
    nagare.restart()
    assert set(listed("--http", nagare.http)) == {"dave"}


def test_add_needs_a_password(tmp_path):
    r = user("add", "x", "--data-dir", str(tmp_path / "d"), check=False)
    assert r.returncode != 0 and "--password" in r.stderr
