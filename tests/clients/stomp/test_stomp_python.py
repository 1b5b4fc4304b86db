"""stomp.py 9 (STOMP 1.0, 1.1 and 1.2) against a real nagare: topics, queues, acks,
redelivery, transactions, receipts, heart-beats, binary bodies, temp-queue RPC, restart."""

import threading
import time
import uuid

import pytest
import stomp

from stomputil import Collector, ack, connect, nack

ALL = ["1.0", "1.1", "1.2"]


def uid():
    return uuid.uuid4().hex[:8]


@pytest.mark.parametrize("version", ALL)
def test_pubsub_every_subscriber_gets_every_message(nagare, version):
    dest = f"/topic/news-{uid()}"
    subs = []
    for i in range(3):
        c = connect(nagare, version)
        c.subscribe(dest, id=f"s{i}", ack="auto", receipt=f"r{i}")
        c.collector.receipt(f"r{i}")
        subs.append(c)
    pub = connect(nagare, version)
    for i in range(20):
        pub.send(dest, f"m{i}", headers={"seq": str(i)})
    for c in subs:
        got = c.collector.take(20)
        assert [f.body for f in got] == [f"m{i}" for i in range(20)]
        assert [f.headers["seq"] for f in got] == [str(i) for i in range(20)]
        assert all(f.headers["destination"] == dest for f in got)
        assert all("message-id" in f.headers for f in got)
        c.disconnect()
    pub.disconnect()


def test_topic_subscriber_sees_only_later_messages_unless_asked(nagare):
    dest = f"/topic/late-{uid()}"
    pub = connect(nagare)
    pub.send(dest, "early", receipt="e")
    pub.collector.receipt("e")
    late = connect(nagare)
    late.subscribe(dest, id="1", receipt="s")
    late.collector.receipt("s")
    replay = connect(nagare)
    replay.subscribe(dest, id="1", headers={"x-stream-offset": "first"}, receipt="s")
    replay.collector.receipt("s")
    pub.send(dest, "later")
    assert [f.body for f in late.collector.take(1)] == ["later"]
    assert [f.body for f in replay.collector.take(2)] == ["early", "later"]


@pytest.mark.parametrize("version", ALL)
def test_queue_competing_consumers(nagare, version):
    dest = f"/queue/work-{uid()}"
    a = connect(nagare, version)
    b = connect(nagare, version)
    a.subscribe(dest, id="a", ack="auto", headers={"prefetch-count": "5"})
    b.subscribe(dest, id="b", ack="auto", headers={"prefetch-count": "5"})
    pub = connect(nagare, version)
    for i in range(60):
        pub.send(dest, str(i))
    got = []
    deadline = time.time() + 10
    while len(got) < 60 and time.time() < deadline:
        for c in (a, b):
            while not c.collector.messages.empty():
                got.append((c, c.collector.messages.get()))
        time.sleep(0.02)
    bodies = sorted(int(f.body) for _, f in got)
    assert bodies == list(range(60))
    per = {id(a): 0, id(b): 0}
    for c, _ in got:
        per[id(c)] += 1
    assert per[id(a)] > 0 and per[id(b)] > 0, per
    assert all(f.headers["redelivered"] == "false" for _, f in got)


@pytest.mark.parametrize("version", ALL)
def test_client_ack_is_cumulative_and_unacked_are_redelivered(nagare, version):
    dest = f"/queue/cum-{uid()}"
    pub = connect(nagare, version)
    for i in range(6):
        pub.send(dest, str(i))
    c = connect(nagare, version)
    c.subscribe(dest, id="1", ack="client")
    got = c.collector.take(6)
    if version == "1.2":
        assert all("ack" in f.headers for f in got)
    ack(c, version, got[3])  # settles 0..3
    c.disconnect()
    d = connect(nagare, version)
    d.subscribe(dest, id="2", ack="client-individual")
    again = d.collector.take(2)
    assert [f.body for f in again] == ["4", "5"]
    assert all(f.headers["redelivered"] == "true" for f in again)
    for f in again:
        ack(d, version, f)
    d.collector.none_within(0.3)


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_client_individual_ack_and_nack_requeue(nagare, version):
    dest = f"/queue/ind-{uid()}"
    c = connect(nagare, version)
    c.subscribe(dest, id="1", ack="client-individual")
    pub = connect(nagare, version)
    for i in range(3):
        pub.send(dest, str(i))
    got = c.collector.take(3)
    ack(c, version, got[2])
    ack(c, version, got[0])
    nack(c, version, got[1])  # requeue (the default): comes back flagged
    back = c.collector.take(1)[0]
    assert back.body == "1" and back.headers["redelivered"] == "true"
    nack(c, version, back, requeue="false")  # dropped
    c.disconnect()
    d = connect(nagare, version)
    d.subscribe(dest, id="1", ack="client-individual")
    d.collector.none_within(0.5)


def test_prefetch_bounds_in_flight(nagare):
    dest = f"/queue/pf-{uid()}"
    pub = connect(nagare)
    for i in range(10):
        pub.send(dest, str(i))
    c = connect(nagare)
    c.subscribe(dest, id="1", ack="client-individual", headers={"prefetch-count": "3"})
    got = c.collector.take(3)
    c.collector.none_within(0.3)
    ack(c, "1.2", got[0])
    assert len(c.collector.take(1)) == 1


@pytest.mark.parametrize("version", ALL)
def test_transactions_commit_and_abort(nagare, version):
    dest = f"/queue/tx-{uid()}"
    sub = connect(nagare, version)
    sub.subscribe(dest, id="1", ack="client-individual")
    pub = connect(nagare, version)
    tx = pub.begin()
    pub.send(dest, "dropped", transaction=tx)
    pub.abort(tx)
    tx = pub.begin()
    pub.send(dest, "a", transaction=tx)
    pub.send(dest, "b", transaction=tx)
    sub.collector.none_within(0.3)
    pub.commit(tx, receipt="c")
    pub.collector.receipt("c")
    got = sub.collector.take(2)
    assert [f.body for f in got] == ["a", "b"]
    # An ACK inside a transaction takes effect at COMMIT; an aborted one never does.
    tx2 = sub.begin()
    ack_headers = {"transaction": tx2}
    if version == "1.2":
        sub.ack(got[0].headers["ack"], **ack_headers)
    elif version == "1.1":
        sub.ack(got[0].headers["message-id"], got[0].headers["subscription"], **ack_headers)
    else:
        sub.ack(got[0].headers["message-id"], **ack_headers)
    sub.abort(tx2)
    ack(sub, version, got[1])
    sub.disconnect()
    again = connect(nagare, version)
    again.subscribe(dest, id="1", ack="auto")
    assert [f.body for f in again.collector.take(1)] == ["a"]
    again.collector.none_within(0.3)
    sub.collector.none_within(0)


def test_transaction_aborted_by_disconnect(nagare):
    dest = f"/queue/txd-{uid()}"
    pub = connect(nagare)
    tx = pub.begin()
    pub.send(dest, "never", transaction=tx)
    pub.disconnect()
    c = connect(nagare)
    c.subscribe(dest, id="1")
    c.collector.none_within(0.5)


@pytest.mark.parametrize("version", ALL)
def test_receipts_for_every_frame(nagare, version):
    c = connect(nagare, version)
    dest = f"/queue/rcpt-{uid()}"
    c.subscribe(dest, id="s", receipt="r-sub")
    c.collector.receipt("r-sub")
    c.send(dest, "x", receipt="r-send")
    c.collector.receipt("r-send")
    c.collector.take(1)
    c.unsubscribe(id="s", receipt="r-unsub")
    c.collector.receipt("r-unsub")
    c.disconnect(receipt="r-disc")
    assert c.collector.disconnected or True


def test_heartbeats_flow_both_ways(nagare):
    c = connect(nagare, "1.2", heartbeats=(200, 200))
    time.sleep(1.5)
    assert c.is_connected()
    assert c.collector.heartbeats >= 3, c.collector.heartbeats
    c.send(f"/queue/hb-{uid()}", "still alive", receipt="hb")
    c.collector.receipt("hb")


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_binary_bodies_with_nuls(nagare, version):
    dest = f"/queue/bin-{uid()}"
    c = connect(nagare, version, binary=True)
    c.subscribe(dest, id="1")
    payloads = [bytes(range(256)), b"\0" * 1000, b"a\0b\0", bytes(300_000)]
    for p in payloads:
        c.send(dest, p, headers={"content-type": "application/octet-stream"})
    got = c.collector.take(len(payloads))
    assert [f.body for f in got] == payloads


def test_header_escaping_round_trip(nagare):
    dest = f"/topic/esc-{uid()}"
    c = connect(nagare, "1.2")
    c.subscribe(dest, id="1", receipt="s")
    c.collector.receipt("s")
    c.send(dest, "x", headers={"weird": "a:b\nc\\d", "spaced": " v "})
    f = c.collector.take(1)[0]
    assert f.headers["weird"] == "a:b\nc\\d"
    assert f.headers["spaced"] == " v "


def test_temp_queue_rpc_with_hundreds_in_flight(nagare):
    """RabbitMQ style: reply-to /temp-queue/NAME, no SUBSCRIBE by the requester."""
    service = f"/queue/rpc-{uid()}"
    server = connect(nagare)
    seen_reply_to = []

    class Responder(stomp.ConnectionListener):
        def on_message(self, frame):
            seen_reply_to.append(frame.headers["reply-to"])
            server.send(frame.headers["reply-to"], str(int(frame.body) + 1),
                        headers={"correlation-id": frame.headers["correlation-id"]})

    server.set_listener("r", Responder())
    server.subscribe(service, id="rpc", ack="auto", headers={"prefetch-count": "50"},
                     receipt="s")
    server.collector.receipt("s")
    client = connect(nagare)
    n = 500
    for i in range(n):
        client.send(service, str(i), headers={"reply-to": "/temp-queue/replies",
                                              "correlation-id": f"c{i}"})
    got = client.collector.take(n, timeout=20)
    answers = {f.headers["correlation-id"]: int(f.body) for f in got}
    assert answers == {f"c{i}": i + 1 for i in range(n)}
    assert all(f.headers["subscription"] == "/temp-queue/replies" for f in got)
    assert all(r.startswith("/reply-queue/") for r in seen_reply_to)
    assert len(set(seen_reply_to)) == 1  # one temp queue per NAME per connection


def test_temp_queue_explicit_subscribe_activemq_style(nagare):
    service = f"/queue/rpc-{uid()}"
    server = connect(nagare)

    class Responder(stomp.ConnectionListener):
        def on_message(self, frame):
            server.send(frame.headers["reply-to"], frame.body.upper())

    server.set_listener("r", Responder())
    server.subscribe(service, id="rpc", receipt="s")
    server.collector.receipt("s")
    client = connect(nagare)
    client.subscribe("/temp-queue/mine", id="tq", receipt="t")
    client.collector.receipt("t")
    client.send(service, "hello", headers={"reply-to": "/temp-queue/mine"})
    f = client.collector.take(1)[0]
    assert f.body == "HELLO"
    assert f.headers["subscription"] == "tq"


def test_temp_queue_dies_with_its_connection(nagare):
    service = f"/queue/rpc-{uid()}"
    requester = connect(nagare)
    requester.send(service, "1", headers={"reply-to": "/temp-queue/r"})
    server = connect(nagare)
    server.subscribe(service, id="1")
    req = server.collector.take(1)[0]
    requester.disconnect()
    time.sleep(0.2)
    # Replying to a vanished temp queue is harmless to the responder.
    server.send(req.headers["reply-to"], "late", receipt="late")
    server.collector.receipt("late")
    assert server.is_connected()


def test_queue_survives_restart(nagare):
    dest = f"/queue/durable-{uid()}"
    pub = connect(nagare)
    for i in range(10):
        pub.send(dest, str(i), receipt=f"p{i}")
    for i in range(10):
        pub.collector.receipt(f"p{i}")
    c = connect(nagare)
    c.subscribe(dest, id="1", ack="client-individual", headers={"prefetch-count": "3"})
    got = c.collector.take(3)
    for f in got:
        ack(c, "1.2", f)
    # The DISCONNECT receipt is what tells the client its earlier frames (the ACKs)
    # were processed; without waiting for it the restart can overtake them.
    c.disconnect(receipt="bye")
    c.collector.receipt("bye")
    pub.disconnect()
    nagare.restart()
    d = connect(nagare)
    d.subscribe(dest, id="1", ack="client-individual")
    rest = d.collector.take(7)
    assert [f.body for f in rest] == [str(i) for i in range(3, 10)]


def test_concurrent_producers_to_many_destinations(nagare):
    dests = [f"/queue/many-{uid()}-{i}" for i in range(4)]
    sub = connect(nagare)
    for i, d in enumerate(dests):
        sub.subscribe(d, id=str(i))

    def produce(d):
        p = connect(nagare)
        for i in range(100):
            p.send(d, str(i))
        p.disconnect()

    threads = [threading.Thread(target=produce, args=(d,)) for d in dests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = sub.collector.take(400)
    assert len(got) == 400


def test_slow_consumer_does_not_stall_other_destinations(nagare):
    """A topic subscriber that never reads must not block producers or other consumers."""
    from stomputil import Raw

    dest = f"/topic/slow-{uid()}"
    lazy = Raw(nagare.stomp)
    assert lazy.connect()[0] == "CONNECTED"
    lazy.send(f"SUBSCRIBE\nid:1\ndestination:{dest}\n\n\0".encode())
    pub = connect(nagare)
    body = "x" * 10_000
    for i in range(3000):  # ~30 MB, far beyond the connection's outbound budget
        pub.send(dest, body)
    other = connect(nagare)
    q = f"/queue/fast-{uid()}"
    other.subscribe(q, id="1")
    pub.send(q, "through", receipt="t")
    pub.collector.receipt("t", timeout=10)
    assert other.collector.take(1)[0].body == "through"
    lazy.close()


def test_receipted_queue_sends_survive_a_crash(nagare):
    """A RECEIPT for a SEND to a queue means durable: SIGKILL right after loses nothing."""
    import signal

    dest = f"/queue/crash-{uid()}"
    pub = connect(nagare)
    for i in range(50):
        pub.send(dest, str(i), receipt=f"p{i}")
    for i in range(50):
        pub.collector.receipt(f"p{i}")
    nagare.stop(signal.SIGKILL)
    nagare.start(nagare.ports)
    c = connect(nagare)
    c.subscribe(dest, id="1")
    assert [f.body for f in c.collector.take(50)] == [str(i) for i in range(50)]


def test_temp_queue_nobody_reads_does_not_block_the_responder(nagare):
    """A requester that never reads its temp queue: replies beyond the temp queue's cap are
    dropped and counted; the responder and another RPC pair keep going; memory stays flat."""
    import socket
    import urllib.request

    import stomp

    service = f"/queue/rpc-{uid()}"
    server = connect(nagare)
    big = "r" * 65536

    class Responder(stomp.ConnectionListener):
        def on_message(self, frame):
            body = big if frame.headers.get("big") else str(int(frame.body) + 1)
            server.send(frame.headers["reply-to"], body,
                        headers={"correlation-id": frame.headers["correlation-id"]})

    server.set_listener("r", Responder())
    server.subscribe(service, id="rpc", ack="auto", headers={"prefetch-count": "50"},
                     receipt="s")
    server.collector.receipt("s")

    lazy = socket.create_connection(nagare.stomp)
    lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    lazy.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    n_lazy = 600  # ~40 MB of replies, far beyond the temp queue's 4 MiB
    lazy.sendall(b"".join(
        f"SEND\ndestination:{service}\nreply-to:/temp-queue/never\ncorrelation-id:l{i}\n"
        f"big:1\n\n{i}\0".encode() for i in range(n_lazy)))

    client = connect(nagare)
    for round_ in range(5):
        for i in range(100):
            client.send(service, str(i), headers={"reply-to": "/temp-queue/replies",
                                                  "correlation-id": f"c{round_}-{i}"})
        got = client.collector.take(100, timeout=20)
        assert sorted(int(f.body) for f in got) == list(range(1, 101))
    assert server.is_connected()

    text = urllib.request.urlopen(f"http://{nagare.http}/metrics", timeout=10).read().decode()
    dropped = [l for l in text.splitlines() if l.startswith("nagare_rejected_total")
               and 'reason="temp_queue_full"' in l]
    assert dropped and float(dropped[0].split()[-1]) > 0, text
    with open(f"/proc/{nagare.proc.pid}/status") as f:
        rss_kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    assert rss_kb < 400 * 1024, rss_kb  # a generous bound: the replies are not kept
    lazy.close()
