"""STOMP login and ACLs with real clients (stomp.py, the Ruby `stomp` gem): CONNECT's
login/passcode against the broker's users, refusals as one ERROR then a close, other
connections untouched; SEND/SUBSCRIBE refused by ACLs."""

import pathlib
import subprocess
import time
import uuid

import pytest
import stomp

from stomputil import Raw, connect

RUBY = pathlib.Path(__file__).with_name("stomp_ruby.rb")
REFUSED = "Authentication failed: bad login or passcode"


def ruby(nagare, scenario, *args, version="1.2"):
    host, port = nagare.stomp
    r = subprocess.run(["ruby", str(RUBY), host, str(port), version, scenario, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\n{nagare.read_log()}"
    assert f"OK {scenario}" in r.stdout


def refused_stomp_py(nagare, **kw):
    """stomp.py's CONNECT with these credentials gets the ERROR, then the socket closes."""
    conn = stomp.Connection12([nagare.stomp], heartbeats=(0, 0))
    errors = []

    class L(stomp.ConnectionListener):
        def on_error(self, frame):
            errors.append(frame)

    conn.set_listener("l", L())
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(wait=True, **kw)
    deadline = time.time() + 5
    while not errors and time.time() < deadline:
        time.sleep(0.02)
    assert errors and errors[0].headers["message"] == REFUSED, errors
    deadline = time.time() + 5
    while conn.is_connected() and time.time() < deadline:
        time.sleep(0.02)
    assert not conn.is_connected()


def refused_raw(nagare, extra):
    r = Raw(nagare.stomp)
    cmd, headers, _ = r.connect("1.2", extra)
    assert cmd == "ERROR"
    assert headers["message"] == REFUSED
    assert r.closed()


def pubsub_works(c):
    uid = uuid.uuid4().hex[:8]
    dest = f"/topic/auth-{uid}"
    c.subscribe(dest, id=uid, receipt=f"sub-{uid}")
    c.collector.receipt(f"sub-{uid}")
    c.send(dest, "hello", receipt=f"pub-{uid}")
    c.collector.receipt(f"pub-{uid}")
    assert c.collector.take(1)[0].body == "hello"


def test_fixed_login_with_stomp_py_and_ruby(nagare_factory):
    """The listener's fixed `[stomp] login`/`passcode`: right ones connect (Ruby too),
    wrong or missing ones get one ERROR and a close while another connection goes on."""
    n = nagare_factory(env={"NAGARE_STOMP_LOGIN": "guest", "NAGARE_STOMP_PASSCODE": "pw"})
    good = connect(n, "1.2", username="guest", passcode="pw")
    refused_stomp_py(n, username="guest", passcode="wrong")
    refused_stomp_py(n)
    refused_raw(n, "login:nobody\npasscode:pw\n")
    ruby(n, "login", "guest", "pw")
    ruby(n, "login_refused", "guest", "wrong")
    ruby(n, "login_refused")
    pubsub_works(good)
    good.disconnect()


def test_without_auth_no_credentials_is_anonymous_and_wrong_ones_are_refused(nagare):
    """`--auth none`: no login is anonymous, an unknown user is refused all the same."""
    c = connect(nagare, "1.2")
    pubsub_works(c)
    refused_stomp_py(nagare, username="nobody", passcode="x")
    ruby(nagare, "login_refused", "nobody", "x")
    pubsub_works(c)
    c.disconnect()
