"""Several idempotent producers at once on one partition (their batches are appended in
groups), plus a consumer long-polling while they write."""

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def test_parallel_idempotent_producers_one_partition(nagare):
    n_producers, per_producer = 4, 2000
    errors = []

    def run(k):
        p = Producer({"bootstrap.servers": nagare.kafka, "enable.idempotence": True, "linger.ms": 1,
                      "compression.type": ["none", "lz4", "zstd", "gzip"][k]})
        for i in range(per_producer):
            p.produce("par", f"{k}-{i}".encode(), partition=0,
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
            if i % 500 == 0:
                p.poll(0)
        if p.flush(30) != 0:
            errors.append("flush timed out")

    consumer = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 500})
    consumer.assign([TopicPartition("par", 0, 0)])
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n_producers)]
    for t in threads:
        t.start()
    seen = {}
    deadline = time.time() + 40
    while len(seen) < n_producers * per_producer and time.time() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            seen[m.offset()] = m.value()
    for t in threads:
        t.join()
    consumer.close()
    assert errors == []
    assert sorted(seen) == list(range(n_producers * per_producer))
    values = set(seen.values())
    assert values == {f"{k}-{i}".encode() for k in range(n_producers) for i in range(per_producer)}
    # Each producer's records are in its own order.
    by_producer = {}
    for offset in sorted(seen):
        k, i = seen[offset].decode().split("-")
        by_producer.setdefault(k, []).append(int(i))
    assert all(v == sorted(v) for v in by_producer.values())
