"""STOMP through two gateways over one Kafka cluster (stomp.py, confluent-kafka): competing
queue consumers on different gateways, temp-queue RPC across gateways, a /topic subscriber
seeing what a Kafka producer wrote to the cluster, and receipts meaning the cluster has
the message."""

import collections
import threading
import time

import stomp
from confluent_kafka import Producer

from clusterutil import stomp_connect, uid


def test_competing_queue_consumers_on_two_gateways_get_each_message_once(gateways):
    a, b = gateways
    dest = f"/queue/jobs-{uid()}"
    n = 400
    got = collections.Counter()
    per_gateway = {"A": 0, "B": 0}
    lock = threading.Lock()

    class Worker(stomp.ConnectionListener):
        """Processes a job (a little work), then ACKs it (client-individual)."""

        def __init__(self, name, conn):
            self.name, self.conn = name, conn

        def on_message(self, frame):
            time.sleep(0.002)
            with lock:
                got[frame.body] += 1
                per_gateway[self.name] += 1
            self.conn.ack(frame.headers["ack"])

    consumers = []
    for name, gw in (("A", a), ("B", b)):
        c = stomp_connect(gw)
        c.set_listener("worker", Worker(name, c))
        c.subscribe(dest, id=f"jobs-{name}", ack="client-individual",
                    headers={"prefetch-count": "20"}, receipt=f"sub-{name}")
        c.collector.receipt(f"sub-{name}")
        consumers.append(c)

    # Jobs come at a steady pace. (Kafka hands out a share group's records a record batch
    # at a time, so a burst that the gateway writes as a few large batches may go to one
    # member alone.)
    producer = stomp_connect(a)
    for i in range(n):
        producer.send(dest, f"job-{i}", receipt=f"r{i}" if i % 50 == 49 else None)
        time.sleep(0.005)
    producer.collector.receipt(f"r{n - 1}", timeout=30)

    deadline = time.time() + 60
    while sum(got.values()) < n and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(3)  # a duplicate (a redelivery) would show up here
    for c in consumers + [producer]:
        c.disconnect()

    assert set(got) == {f"job-{i}" for i in range(n)}, f"missing {n - len(got)} of {n}"
    dups = {k: v for k, v in got.items() if v > 1}
    assert not dups, f"{len(dups)} jobs processed more than once, e.g. {list(dups.items())[:5]}"
    assert per_gateway["A"] > 0 and per_gateway["B"] > 0, per_gateway
    print(f"\n{n} jobs split A={per_gateway['A']} B={per_gateway['B']}")


def test_temp_queue_rpc_requester_on_a_responder_on_b(gateways):
    a, b = gateways
    service = f"/queue/rpc-{uid()}"
    responder = stomp_connect(b)
    seen_reply_to = []

    class Responder(stomp.ConnectionListener):
        def on_message(self, frame):
            seen_reply_to.append(frame.headers["reply-to"])
            responder.send(frame.headers["reply-to"], str(int(frame.body) * 2),
                           headers={"correlation-id": frame.headers["correlation-id"]})

    responder.set_listener("rpc", Responder())
    responder.subscribe(service, id="rpc", ack="auto", headers={"prefetch-count": "50"},
                        receipt="s")
    responder.collector.receipt("s")

    requester = stomp_connect(a)
    n = 200
    t0 = time.time()
    for i in range(n):
        requester.send(service, str(i), headers={"reply-to": "/temp-queue/x",
                                                 "correlation-id": f"c{i}"})
    replies = requester.collector.take(n, timeout=60)
    elapsed = time.time() - t0
    answers = {f.headers["correlation-id"]: int(f.body) for f in replies}
    assert answers == {f"c{i}": 2 * i for i in range(n)}
    assert all(f.headers["subscription"] == "/temp-queue/x" for f in replies)
    assert len(set(seen_reply_to)) == 1, set(seen_reply_to)
    requester.collector.none_within(1)
    requester.disconnect()
    responder.disconnect()
    print(f"\n{n} RPCs A->B->A in {elapsed:.2f}s, reply-to {seen_reply_to[0]}")


def test_topic_subscriber_on_b_sees_records_a_kafka_producer_wrote(kafka_cluster, gateways):
    _, b = gateways
    topic = kafka_cluster.create_topic(f"events-{uid()}")
    sub = stomp_connect(b)
    sub.subscribe(f"/topic/{topic}", id="t", receipt="s")
    sub.collector.receipt("s")

    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    n = 100
    for i in range(n):
        p.produce(topic, value=f"kafka-{i}".encode(), key=f"k{i}".encode())
    assert p.flush(30) == 0
    got = sub.collector.take(n, timeout=30)
    assert [f.body for f in got] == [f"kafka-{i}" for i in range(n)]
    sub.collector.none_within(0.5)

    # A subscriber that starts later reads the topic from its first record when asked.
    late = stomp_connect(b)
    late.subscribe(f"/topic/{topic}", id="late", headers={"x-stream-offset": "first"})
    assert [f.body for f in late.collector.take(n, timeout=30)] == [f"kafka-{i}" for i in range(n)]
    sub.disconnect()
    late.disconnect()


def test_receipted_send_is_in_the_cluster_when_the_receipt_comes(kafka_cluster, gateways):
    a, _ = gateways
    topic = f"receipted-{uid()}"
    c = stomp_connect(a)
    n = 20
    for i in range(n):
        c.send(f"/topic/{topic}", f"m{i}", receipt=f"r{i}")
        c.collector.receipt(f"r{i}", timeout=30)
        # Once the RECEIPT is there, a Kafka client reading the cluster sees the message.
        ends = kafka_cluster.end_offsets(topic)
        assert sum(ends.values()) == i + 1, f"after RECEIPT r{i} the cluster's end offsets are {ends}"
    records = sorted(kafka_cluster.read_topic(topic))
    assert sorted(v for _, _, _, v, _ in records) == sorted(f"m{i}".encode() for i in range(n))
    c.disconnect()
