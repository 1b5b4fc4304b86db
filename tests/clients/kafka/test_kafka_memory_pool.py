"""The request memory pool ([kafka] queued_max_request_bytes, Kafka's
queued.max.request.bytes): producers with more bytes in flight than the pool are slowed
down, never refused, and every record lands; a single request larger than the whole pool
closes its connection with a log line, as in Kafka."""

import socket
import struct
import threading
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

POOL = 512 * 1024


def pooled(nagare_factory):
    return nagare_factory(env={"NAGARE_KAFKA_QUEUED_MAX_REQUEST_BYTES": str(POOL)})


def test_producers_beyond_the_pool_all_land(nagare_factory):
    nagare = pooled(nagare_factory)
    topic, producers, per_producer, size = "pool-flood", 4, 5000, 1000
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    admin.create_topics([NewTopic(topic, producers, 1)])[topic].result(10)
    errors, acked = [], [0] * producers

    def run(i):
        # 5 requests of up to 64 KiB in flight per producer: 4 producers want more than
        # the pool holds at once.
        p = Producer({"bootstrap.servers": nagare.kafka, "acks": "all", "linger.ms": 5,
                      "batch.size": 65536, "max.in.flight.requests.per.connection": 5,
                      "enable.idempotence": True})

        def report(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked[i] += 1

        for n in range(per_producer):
            value = f"{i}:{n}:".encode().ljust(size, b"x")
            while True:
                try:
                    p.produce(topic, value, partition=i, on_delivery=report)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(60) == 0

    started = time.time()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.time() - started
    assert not errors, errors[:5]
    assert acked == [per_producer] * producers
    total_mb = producers * per_producer * size / 1e6
    print(f"{total_mb:.0f} MB through a {POOL // 1024} KiB pool in {elapsed:.1f} s")

    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(producers)])
    seen = set()
    deadline = time.time() + 60
    while len(seen) < producers * per_producer and time.time() < deadline:
        for m in c.consume(1000, 0.5):
            assert m.error() is None, m.error()
            i, n, _ = m.value().split(b":", 2)
            assert int(i) == m.partition()
            seen.add((int(i), int(n)))
    c.close()
    assert seen == {(i, n) for i in range(producers) for n in range(per_producer)}
    assert "memory pool" not in nagare.read_log()


def test_request_larger_than_the_pool_closes_only_its_connection(nagare_factory):
    nagare = pooled(nagare_factory)
    host, port = nagare.host_port("kafka")
    with socket.create_connection((host, port), timeout=10) as s:
        # ApiVersions v0 header, claiming a body bigger than the pool but within
        # max_request_bytes.
        header = struct.pack(">hhih", 18, 0, 7, 1) + b"c"
        s.sendall(struct.pack(">i", POOL + 1) + header)
        assert s.recv(1024) == b"", "the connection is closed"
    deadline = time.time() + 5
    while "memory pool" not in nagare.read_log() and time.time() < deadline:
        time.sleep(0.05)
    assert "larger than the whole request memory pool" in nagare.read_log()
    # Everyone else is served as before.
    p = Producer({"bootstrap.servers": nagare.kafka})
    p.produce("pool-after", b"still fine")
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused-" + uuid.uuid4().hex,
                  "enable.partition.eof": False})
    c.assign([TopicPartition("pool-after", 0, 0)])
    m = None
    deadline = time.time() + 10
    while m is None and time.time() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m is not None and m.error() is None and m.value() == b"still fine"
