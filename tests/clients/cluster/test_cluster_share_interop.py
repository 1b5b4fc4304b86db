"""`/queue/Q` is the Kafka share group `Q` on topic `queue.Q`: a Java KafkaShareConsumer
(kafka-clients 4.3.1) in that group takes what a STOMP producer sent through a gateway, and a
STOMP consumer on another gateway takes what a Kafka producer wrote to `queue.Q`."""

from confluent_kafka import Producer

from clusterutil import share_worker, stomp_connect, uid, worker_line


def test_stomp_queue_and_kafka_share_group_are_one(kafka_cluster, gateways):
    a, b = gateways
    q = f"shared-{uid()}"
    topic = f"queue.{q}"
    # Like any Kafka user of an existing queue: read it from its start.
    assert "OK config" in share_worker(kafka_cluster.bootstrap, q, "config", "share.auto.offset.reset=earliest")

    producer = stomp_connect(a)
    n = 100
    for i in range(n):
        producer.send(f"/queue/{q}", f"stomp-{i}", receipt="last" if i == n - 1 else None)
    producer.collector.receipt("last", timeout=30)
    producer.disconnect()
    out = share_worker(kafka_cluster.bootstrap, q, "consume", topic, n, env={"DEADLINE_MS": "60000"})
    assert sorted(worker_line(out, "values")) == sorted(f"stomp-{i}" for i in range(n))

    consumer = stomp_connect(b)
    consumer.subscribe(f"/queue/{q}", id="q", ack="client-individual", receipt="s")
    consumer.collector.receipt("s")
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(50):
        p.produce(topic, value=f"kafka-{i}".encode())
    assert p.flush(30) == 0
    got = consumer.collector.take(50, timeout=60)
    for f in got:
        consumer.ack(f.headers["ack"])
    assert sorted(f.body for f in got) == sorted(f"kafka-{i}" for i in range(50))
    # What the Java consumer accepted is not delivered again.
    consumer.collector.none_within(2)
    consumer.disconnect()
