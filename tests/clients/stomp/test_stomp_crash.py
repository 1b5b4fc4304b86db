"""stomp.py across a crash (SIGKILL): queue messages that were delivered and not yet
acknowledged when the broker died come back with `redelivered:true`; messages never
delivered before come back without it."""

import signal
import time
import uuid

from stomputil import ack, connect


def test_in_flight_messages_at_a_crash_come_back_redelivered(nagare):
    dest = f"/queue/crash-{uuid.uuid4().hex[:8]}"
    pub = connect(nagare)
    for i in range(5):
        pub.send(dest, str(i), receipt=f"p{i}")
    for i in range(5):
        pub.collector.receipt(f"p{i}")
    c = connect(nagare)
    c.subscribe(dest, id="1", ack="client-individual", headers={"prefetch-count": "3"})
    got = c.collector.take(3)
    assert [f.body for f in got] == ["0", "1", "2"]
    assert all(f.headers["redelivered"] == "false" for f in got)
    ack(c, "1.2", got[0])
    assert [f.body for f in c.collector.take(1)] == ["3"]
    # The delivery state is written within milliseconds of the delivery.
    time.sleep(0.5)
    nagare.restart(signal.SIGKILL)
    d = connect(nagare)
    d.subscribe(dest, id="1", ack="client-individual")
    rest = d.collector.take(4)
    assert [f.body for f in rest] == ["1", "2", "3", "4"]
    assert [f.headers["redelivered"] for f in rest] == ["true", "true", "true", "false"]
