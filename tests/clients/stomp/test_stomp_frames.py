"""Hand-written frames over a raw socket: negotiation, limits, malformed input (ERROR then
close, other connections unaffected), dead-peer detection, auth and virtual host."""

import time
import uuid

import pytest

from stomputil import Raw, connect


def test_version_negotiation(nagare):
    for offered, expect in [("1.0,1.1,1.2", "1.2"), ("1.1", "1.1"), ("1.0,1.1", "1.1")]:
        r = Raw(nagare.stomp)
        cmd, h, _ = r.connect(offered)
        assert cmd == "CONNECTED" and h["version"] == expect, h
        r.close()
    # No accept-version: a 1.0 client.
    r = Raw(nagare.stomp)
    r.send(b"CONNECT\n\n\0")
    cmd, h, _ = r.frame()
    assert cmd == "CONNECTED" and "session" in h
    r.close()
    # STOMP works like CONNECT; CRLF line ends are fine.
    r = Raw(nagare.stomp)
    r.send(b"STOMP\r\naccept-version:1.2\r\nhost:x\r\n\r\n\0")
    assert r.frame()[0] == "CONNECTED"
    r.close()
    # Nothing in common: ERROR with the versions we speak, then close.
    r = Raw(nagare.stomp)
    cmd, h, _ = r.connect("2.0,3.1")
    assert cmd == "ERROR" and h["version"] == "1.0,1.1,1.2"
    assert r.closed()


@pytest.mark.parametrize("wire", [
    b"BOGUS\n\n\0",
    b"SEND\ndestination:/queue/a\nno colon here\n\n\0",
    b"SEND\ndestination:/queue/a\nbad:\\t\n\n\0",
    b"SEND\ndestination:/queue/a\ncontent-length:2\n\nabc\0",
    b"SEND\ndestination:/queue/a\ncontent-length:-1\n\n\0",
    b"SEND\ndestination:/nowhere/a\n\n\0",
    b"SEND\n\nno destination\0",
    b"SUBSCRIBE\ndestination:/queue/a\n\n\0",  # 1.2 needs an id
    b"COMMIT\ntransaction:unknown\n\n\0",
    b"MESSAGE\ndestination:/queue/a\n\n\0",
    b"\rX",
    b"ACK\nmessage-id:1-1-1\n\n\0",  # 1.2 needs an id
    b"NACK\nmessage-id:1-1-1\n\n\0",
    b"SEND\ndestination:/queue/bad name\n\n\0",
    b"SUBSCRIBE\nid:1\ndestination:/topic/caf\xc3\xa9\n\n\0",
])
def test_malformed_frames_get_error_then_close(nagare, wire):
    bystander = connect(nagare)
    q = f"/queue/by-{uuid.uuid4().hex[:8]}"
    bystander.subscribe(q, id="1")
    r = Raw(nagare.stomp)
    assert r.connect()[0] == "CONNECTED"
    r.send(wire)
    f = r.frame()
    assert f is not None and f[0] == "ERROR", f
    assert f[1].get("message")
    assert r.closed()
    bystander.send(q, "unaffected", receipt="u")
    bystander.collector.receipt("u")
    assert bystander.collector.take(1)[0].body == "unaffected"


def test_error_carries_receipt_id(nagare):
    r = Raw(nagare.stomp)
    r.connect()
    r.send(b"SEND\ndestination:/bad/x\nreceipt:77\n\n\0")
    cmd, h, _ = r.frame()
    assert cmd == "ERROR" and h["receipt-id"] == "77"


def test_frame_before_connect_is_refused(nagare):
    r = Raw(nagare.stomp)
    r.send(b"SEND\ndestination:/queue/a\n\nx\0")
    assert r.frame()[0] == "ERROR"
    assert r.closed()


def test_oversized_frame_is_refused(nagare_factory):
    n = nagare_factory(env={"NAGARE_STOMP_MAX_FRAME_BYTES": "65536"})
    r = Raw(n.stomp)
    r.connect()
    r.send(b"SEND\ndestination:/queue/big\n\n" + b"x" * 70_000 + b"\0")
    assert r.frame()[0] == "ERROR"
    assert r.closed()
    r = Raw(n.stomp)
    r.connect()
    r.send(b"SEND\ndestination:/queue/big\ncontent-length:100000\n\n")
    assert r.frame()[0] == "ERROR"
    headers = "".join(f"h{i}:v\n" for i in range(500))
    r = Raw(n.stomp)
    r.connect()
    r.send(f"SEND\ndestination:/queue/big\n{headers}\n\0".encode())
    assert r.frame()[0] == "ERROR"


def test_many_frames_in_one_write_and_one_frame_in_many(nagare):
    q = f"/queue/pipe-{uuid.uuid4().hex[:8]}"
    r = Raw(nagare.stomp)
    r.connect()
    r.send(f"SUBSCRIBE\nid:1\ndestination:{q}\n\n\0".encode()
           + b"".join(f"SEND\ndestination:{q}\n\n{i}\0\n".encode() for i in range(100))
           + b"DISCONNECT\nreceipt:bye\n\n\0")
    got = []
    while True:
        f = r.frame()
        if f is None:
            break
        got.append(f)
    assert got[-1][0] == "RECEIPT" and got[-1][1]["receipt-id"] == "bye"
    bodies = [f[2] for f in got if f[0] == "MESSAGE"]
    assert len(bodies) <= 100
    r = Raw(nagare.stomp)
    r.connect()
    wire = f"SUBSCRIBE\nid:1\ndestination:{q}-b\n\n\0SEND\ndestination:{q}-b\ncontent-length:3\n\na\0b\0".encode()
    for b in wire:
        r.send(bytes([b]))
    cmd, h, body = r.frame()
    assert cmd == "MESSAGE" and body == b"a\0b"


def test_duplicate_subscription_id_is_an_error(nagare):
    r = Raw(nagare.stomp)
    r.connect()
    r.send(b"SUBSCRIBE\nid:1\ndestination:/queue/a\n\n\0SUBSCRIBE\nid:1\ndestination:/queue/b\n\n\0")
    assert r.frame()[0] == "ERROR"


def test_silent_peer_is_dropped(nagare):
    r = Raw(nagare.stomp)
    cmd, h, _ = r.connect("1.2", "heart-beat:200,0\n")
    assert cmd == "CONNECTED"
    assert h["heart-beat"].split(",")[1] != "0"
    # Promised a heart-beat every 200 ms, then silent: dropped within the tolerance.
    start = time.time()
    assert r.closed(timeout=5)
    assert time.time() - start < 3


def test_server_heartbeats_arrive(nagare):
    r = Raw(nagare.stomp)
    r.connect("1.2", "heart-beat:0,100\n")
    r.sock.settimeout(2)
    data = b""
    deadline = time.time() + 0.8
    while time.time() < deadline:
        data += r.sock.recv(100)
    assert data.count(b"\n") >= 3


def test_login_and_virtual_host(nagare_factory):
    n = nagare_factory(env={"NAGARE_STOMP_LOGIN": "guest", "NAGARE_STOMP_PASSCODE": "pw",
                            "NAGARE_STOMP_VHOST": "/"})
    r = Raw(n.stomp)
    assert r.connect("1.2", "login:guest\npasscode:pw\n")[0] == "CONNECTED"
    r = Raw(n.stomp)
    cmd, h, _ = r.connect("1.2", "login:guest\npasscode:wrong\n")
    assert cmd == "ERROR"
    assert r.closed()
    r = Raw(n.stomp)
    r.send(b"CONNECT\naccept-version:1.2\nhost:other\nlogin:guest\npasscode:pw\n\n\0")
    assert r.frame()[0] == "ERROR"
    c = connect(n, "1.2", vhost="/", username="guest", passcode="pw")
    assert c.is_connected()


def test_frames_pipelined_after_connect_use_the_negotiated_escaping(nagare):
    q = f"/queue/esc-{uuid.uuid4().hex[:8]}"
    r = Raw(nagare.stomp)
    r.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
           + f"SUBSCRIBE\nid:a\\cb\ndestination:{q}\n\n\0".encode()
           + f"SEND\ndestination:{q}\nx:1\\n2\n\nbody\0".encode())
    assert r.frame()[0] == "CONNECTED"
    cmd, h, body = r.frame()
    assert cmd == "MESSAGE" and body == b"body"
    assert h["subscription"] == "a\\cb"  # "a:b", escaped on the wire
    assert h["x"] == "1\\n2"


def test_stray_nuls_and_line_ends_between_frames_are_tolerated(nagare):
    q = f"/queue/nul-{uuid.uuid4().hex[:8]}"
    r = Raw(nagare.stomp)
    r.send(b"\0\n")
    assert r.connect()[0] == "CONNECTED"
    r.send(f"\0\0SUBSCRIBE\nid:1\ndestination:{q}\n\n\0\0\n\0\r\n".encode()
           + f"SEND\ndestination:{q}\n\nafter nuls\0\0\0".encode()
           + b"\n\0DISCONNECT\nreceipt:bye\n\n\0")
    cmd, h, body = r.frame()
    assert cmd == "MESSAGE" and body == b"after nuls"
    cmd, h, _ = r.frame()
    assert cmd == "RECEIPT" and h["receipt-id"] == "bye"


def test_illegal_destination_names_are_refused_not_merged(nagare):
    """`/queue/bad name` would land in the topic of `/queue/bad_name` if rewritten."""
    good = connect(nagare)
    good.subscribe("/queue/bad_name", id="1", receipt="s")
    good.collector.receipt("s")
    r = Raw(nagare.stomp)
    r.connect()
    r.send(b"SEND\ndestination:/queue/bad name\nreceipt:1\n\nlost?\0")
    cmd, h, body = r.frame()
    assert cmd == "ERROR" and h["receipt-id"] == "1"
    assert "ASCII letters, digits" in h["message"], h
    assert r.closed()
    good.send("/queue/bad_name", "mine", receipt="m")
    good.collector.receipt("m")
    assert [f.body for f in good.collector.take(1)] == ["mine"]
    good.collector.none_within(0.3)


def test_send_over_the_record_limit_gets_an_error_quoting_it(nagare):
    import urllib.request

    q = f"big-{uuid.uuid4().hex[:8]}"
    r = Raw(nagare.stomp)
    r.connect()
    body = b"x" * 1_100_000  # over the default max.message.bytes (1 MiB + 12)
    r.send(f"SEND\ndestination:/queue/{q}\nreceipt:big\ncontent-length:{len(body)}\n\n".encode()
           + body + b"\0")
    cmd, h, text = r.frame()
    assert cmd == "ERROR" and h["receipt-id"] == "big", h
    assert (f"message body of 1100000 bytes exceeds the limit of 1048588 bytes "
            f"(max.message.bytes of topic queue.{q}") in text.decode(), text
    assert r.closed()
    # Small messages to the same queue still go in, batched within the limit.
    c = connect(nagare)
    c.subscribe(f"/queue/{q}", id="1")
    for i in range(30):
        c.send(f"/queue/{q}", "y" * 100_000, headers={"n": str(i)})
    got = c.collector.take(30, timeout=20)
    assert [f.headers["n"] for f in got] == [str(i) for i in range(30)]
    text = urllib.request.urlopen(f"http://{nagare.http}/metrics", timeout=10).read().decode()
    line = [l for l in text.splitlines() if l.startswith("nagare_rejected_total")
            and 'protocol="stomp"' in l and 'reason="message_too_large"' in l]
    assert line and float(line[0].split()[-1]) >= 1, text
