"""Forwarded events as the other front ends see them: a STOMP /topic/ subscriber
(stomp.py) gets them live, and acked chunks survive a crash (SIGKILL) and restart."""

import json
import signal
import time

import stomp

from fwdutil import Conn, entries, event_time, kafka_read, pack


def test_stomp_topic_subscriber_receives_forwarded_events(nagare):
    host, port = nagare.stomp
    listener = stomp.listener.TestListener()
    conn = stomp.Connection12([(host, port)], heartbeats=(0, 0))
    conn.set_listener("", listener)
    conn.connect(wait=True)
    conn.subscribe("/topic/stomp.fwd", id="1", ack="auto")
    time.sleep(0.3)  # the subscription starts at the log end: let it settle first
    c = Conn(nagare.forward)
    evs = [(event_time(1_700_000_000 + i, i), {"seq": i, "msg": f"to stomp {i}"}) for i in range(20)]
    c.send(pack(["stomp.fwd", entries(evs), {"chunk": "s"}]))
    assert c.reply() == {"ack": "s"}
    c.close()
    deadline = time.time() + 10
    while len(listener.message_list) < 20 and time.time() < deadline:
        time.sleep(0.05)
    conn.disconnect()
    assert len(listener.message_list) == 20
    # stomp.py's TestListener keeps (headers, body) pairs.
    bodies = [json.loads(body) for _, body in listener.message_list]
    assert [b["seq"] for b in bodies] == list(range(20))
    assert bodies[3]["msg"] == "to stomp 3"
    headers = listener.message_list[3][0]
    assert headers["fluent.tag"] == "stomp.fwd"
    assert headers["fluent.time_ns"] == str((1_700_000_003) * 10**9 + 3)


def test_acked_chunks_survive_sigkill(nagare):
    c = Conn(nagare.forward)
    for k in range(20):
        evs = [(1_700_000_000 + k, {"seq": k * 50 + i}) for i in range(50)]
        c.send(pack(["crash.safe", entries(evs), {"chunk": f"k{k}"}]))
        assert c.reply() == {"ack": f"k{k}"}
    c.close()
    nagare.restart(sig=signal.SIGKILL)
    got = kafka_read(nagare, "crash.safe", 1000)
    assert [json.loads(v)["seq"] for _, v, _ in got] == list(range(1000))
