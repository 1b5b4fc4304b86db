"""One queue, two protocols: STOMP's /queue/Q and the Kafka share group Q on topic queue.Q
are one queue with one delivery state. A stomp.py consumer (client-individual acks) and
a Java KafkaShareConsumer compete for its messages, each processed exactly once; a STOMP
NACK and a consumer leaving redeliver, and the delivery count the Kafka side sees counts
the STOMP deliveries too."""

import queue
import threading
import time
import uuid

import stomp

from share_util import consumed, run_worker, start_worker, wait_polling


class Acker(stomp.ConnectionListener):
    """Acks every message as it arrives (client-individual), keeping the bodies."""

    def __init__(self, conn, ack=True):
        self.conn = conn
        self.ack = ack
        self.bodies = []
        self.frames = queue.Queue()
        self.lock = threading.Lock()

    def on_message(self, frame):
        with self.lock:
            self.bodies.append(frame.body)
        self.frames.put(frame)
        if self.ack:
            self.conn.ack(frame.headers["ack"])


def connect(nagare, ack=True):
    conn = stomp.Connection12([nagare.stomp], heartbeats=(0, 0))
    listener = Acker(conn, ack)
    conn.set_listener("l", listener)
    conn.connect(wait=True)
    return conn, listener


def test_stomp_and_share_consumers_each_message_processed_once(nagare):
    name = "jobs"
    dest = f"/queue/{name}"
    consumer, stomp_got = connect(nagare)
    consumer.subscribe(dest, id="1", ack="client-individual")
    time.sleep(0.5)  # the queue (and its topic queue.jobs) exists once subscribed
    java = start_worker(nagare.kafka, name, "consume", f"queue.{name}", 5000,
                        env={"IDLE_EXIT_MS": "5000", "MAX_POLL_RECORDS": "50"})
    try:
        wait_polling(java)  # the share consumer has joined
        producer, _ = connect(nagare)
        for i in range(5000):
            producer.send(dest, str(i))
        producer.disconnect()
        out, err = java.communicate(timeout=120)
    finally:
        if java.poll() is None:
            java.kill()
    assert java.returncode == 0, out + err
    java_values, counts = consumed(out)
    deadline = time.time() + 10
    while len(java_values) + len(stomp_got.bodies) < 5000 and time.time() < deadline:
        time.sleep(0.1)
    consumer.disconnect()
    with stomp_got.lock:
        stomp_values = list(stomp_got.bodies)
    assert java_values, "the share consumer got some"
    assert stomp_values, "the STOMP consumer got some"
    assert sorted(int(v) for v in java_values + stomp_values) == list(range(5000))
    assert set(counts) == {1}


def test_stomp_nack_and_leaving_count_as_deliveries_for_the_share_consumer(nagare):
    name = "redo-" + uuid.uuid4().hex[:8]
    dest = f"/queue/{name}"
    a, got = connect(nagare, ack=False)
    a.subscribe(dest, id="1", ack="client-individual")
    producer, _ = connect(nagare)
    producer.send(dest, "job")
    producer.disconnect()
    first = got.frames.get(timeout=10)
    assert first.headers["delivery-count"] == "1"
    a.nack(first.headers["ack"])  # requeued: back to the only consumer, redelivered
    again = got.frames.get(timeout=10)
    assert again.headers["redelivered"] == "true"
    assert again.headers["delivery-count"] == "2"
    a.disconnect()  # never acknowledged: requeued again
    out = run_worker(nagare.kafka, name, "consume", f"queue.{name}", 1)
    values, counts = consumed(out)
    assert (values, counts) == (["job"], [3])
