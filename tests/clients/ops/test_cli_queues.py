"""`nagare queue list|describe|purge` on a queue real stomp.py clients use: depth of
sent messages, a consumer holding unacknowledged ones, and a purge that empties the
queue and stays done across a restart."""

import threading
import time
import uuid

import stomp

from cli_util import cli, cli_json


class Held(stomp.ConnectionListener):
    def __init__(self):
        self.frames = []
        self.receipts = set()
        self.cond = threading.Condition()

    def on_message(self, frame):
        with self.cond:
            self.frames.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame):
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def wait(self, pred, timeout=10):
        with self.cond:
            assert self.cond.wait_for(pred, timeout), "timed out"


def connect(nagare):
    c = stomp.Connection12([nagare.stomp])
    listener = Held()
    c.set_listener("held", listener)
    c.connect(wait=True)
    return c, listener


def queue_of(nagare, name):
    qs = [q for q in cli_json(nagare, "queue", "list") if q["name"] == name]
    return qs[0] if qs else None


def wait_for(pred, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_queue_depth_unacked_and_purge_survives_restart(nagare):
    name = f"x-{uuid.uuid4().hex[:8]}"
    dest = f"/queue/{name}"
    pub, pl = connect(nagare)
    for i in range(5):
        pub.send(dest, f"m{i}", headers={"receipt": f"r{i}"})
    pl.wait(lambda: len(pl.receipts) == 5)

    q = wait_for(lambda: queue_of(nagare, name))
    assert q == {"name": name, "topic": f"queue.{name}", "depth": 5, "unacked": 0,
                 "consumers": 0, "redeliveries": 0}
    assert name in cli(nagare, "queue", "list").stdout

    # A consumer that takes three and acknowledges none.
    sub, sl = connect(nagare)
    sub.subscribe(dest, id="1", ack="client-individual", headers={"prefetch-count": "3"})
    sl.wait(lambda: len(sl.frames) == 3)
    d = wait_for(lambda: (lambda d: d["unacked"] == 3 and d)(
        cli_json(nagare, "queue", "describe", name)))
    assert (d["depth"], d["unacked"], d["consumers"]) == (2, 3, 1)
    assert (d["log_start_offset"], d["log_end_offset"]) == (0, 5)
    human = cli(nagare, "queue", "describe", name).stdout
    assert "UNACKED" in human and name in human

    out = cli(nagare, "queue", "purge", name).stdout
    assert "purged 5 message(s)" in out
    d = cli_json(nagare, "queue", "describe", name)
    assert (d["depth"], d["unacked"], d["consumers"]) == (0, 0, 1)
    time.sleep(0.3)
    assert len(sl.frames) == 3  # nothing more was delivered
    sub.disconnect()
    pub.disconnect()

    nagare.restart()
    assert queue_of(nagare, name)["depth"] == 0
    # Nothing comes back, and the queue goes on working.
    c, l = connect(nagare)
    c.send(dest, "after", headers={"receipt": "a"})
    l.wait(lambda: "a" in l.receipts)
    assert queue_of(nagare, name)["depth"] == 1
    c.subscribe(dest, id="1", ack="auto")
    l.wait(lambda: len(l.frames) >= 1)
    time.sleep(0.3)
    assert [f.body for f in l.frames] == ["after"]
    c.disconnect()

    missing = cli(nagare, "queue", "purge", "no-such-queue", check=False)
    assert missing.returncode != 0 and "404" in missing.stderr
