"""10,000 partitions under `ulimit -n 1024`, across a restart.

The server runs with a hard and soft RLIMIT_NOFILE of 1024, far fewer descriptors than
partitions: segment files must be opened lazily and closed when idle. Topics totalling
10,000 partitions are created with confluent-kafka's AdminClient, one record is produced
to every partition (acks=all), the server is restarted under the same limit, and every
partition is read back. The server must never die, and its log must never mention EMFILE.
"""

import os
import resource
import signal
import time

import pytest

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

NOFILE = 1024
TOPICS = 10
PARTITIONS_PER_TOPIC = 1000
# Generous bounds: opening, creating and cleanly closing 10,000 partitions costs a
# directory fsync (and on close a segment fsync and a marker file) per partition, which
# takes minutes on a slow disk. The test stops by itself within them.
START_TIMEOUT = 300
STEP_TIMEOUT = 300


def limit_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def assert_healthy(nagare):
    assert nagare.alive(), f"server died:\n{nagare.read_log()}"
    log = nagare.log_path.read_text(errors="replace")
    assert "Too many open files" not in log, log[-8000:]
    assert "EMFILE" not in log, log[-8000:]
    assert open_fds(nagare.proc.pid) <= NOFILE


def create_topics(bootstrap, names):
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": STEP_TIMEOUT * 1000})
    # One request per topic: the server creates a request's topics one after another.
    for n in names:
        futures = admin.create_topics(
            [NewTopic(n, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1)],
            request_timeout=STEP_TIMEOUT, operation_timeout=STEP_TIMEOUT)
        for f in futures.values():
            f.result(timeout=STEP_TIMEOUT)
    deadline = time.time() + STEP_TIMEOUT
    while time.time() < deadline:
        md = admin.list_topics(timeout=30)
        if all(n in md.topics and len(md.topics[n].partitions) == PARTITIONS_PER_TOPIC
               for n in names):
            return
        time.sleep(0.5)
    raise AssertionError("created topics never showed all their partitions")


def produce_one_per_partition(bootstrap, names):
    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 50,
        "queue.buffering.max.messages": 2 * TOPICS * PARTITIONS_PER_TOPIC,
    })
    errors = []
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.topic(), msg.partition(), msg.offset()))

    for name in names:
        for i in range(PARTITIONS_PER_TOPIC):
            p.produce(name, f"{name}/{i}".encode(), partition=i, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(STEP_TIMEOUT) == 0, "not every record was acknowledged in time"
    assert errors == []
    return delivered


def read_all(bootstrap, names):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(n, i, 0) for n in names for i in range(PARTITIONS_PER_TOPIC)])
    want = TOPICS * PARTITIONS_PER_TOPIC
    got = {}
    deadline = time.time() + STEP_TIMEOUT
    while len(got) < want and time.time() < deadline:
        for m in c.consume(num_messages=1000, timeout=0.5):
            if m.error() is None:
                got[(m.topic(), m.partition())] = (m.offset(), m.value())
    c.close()
    return got


@pytest.mark.timeout(1200)
def test_ten_thousand_partitions_under_ulimit_1024(nagare_factory):
    names = [f"many{t}" for t in range(TOPICS)]
    nagare = nagare_factory(preexec_fn=limit_nofile, timeout=START_TIMEOUT)

    t0 = time.time()
    create_topics(nagare.kafka, names)
    t_create = time.time() - t0
    assert_healthy(nagare)

    t0 = time.time()
    delivered = produce_one_per_partition(nagare.kafka, names)
    t_produce = time.time() - t0
    assert sorted(delivered) == sorted((n, i, 0) for n in names for i in range(PARTITIONS_PER_TOPIC))
    assert_healthy(nagare)

    t0 = time.time()
    nagare.restart(timeout=START_TIMEOUT)
    t_restart = time.time() - t0
    assert_healthy(nagare)

    t0 = time.time()
    got = read_all(nagare.kafka, names)
    t_read = time.time() - t0
    want = {(n, i): (0, f"{n}/{i}".encode()) for n in names for i in range(PARTITIONS_PER_TOPIC)}
    missing = sorted(set(want) - set(got))
    assert not missing, f"{len(missing)} partitions lost their record, e.g. {missing[:5]}"
    assert got == want
    assert_healthy(nagare)
    print(f"create {t_create:.1f}s produce {t_produce:.1f}s restart {t_restart:.1f}s "
          f"read {t_read:.1f}s")
    # The clean shutdown was exercised by the restart; the data is thrown away now.
    nagare.stop(signal.SIGKILL)
