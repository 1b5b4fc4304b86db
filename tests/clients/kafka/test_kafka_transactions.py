"""Kafka transactions with confluent-kafka (librdkafka): the transaction coordinator
(InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn), the markers it writes and what a read_committed consumer sees.

- committed records are seen exactly once, aborted ones never;
- a second producer with the same transactional.id fences the first (zombie fencing);
- a transaction open longer than transaction.timeout.ms is aborted by the broker;
- consume-transform-produce: offsets sent to the transaction are committed to the group
  only when the transaction commits;
- a broker killed (SIGKILL) mid-transaction comes back with the open transaction aborted
  once it times out, and committed ones intact;
- the Java client (kafka-clients 4.3.1, built by setup.sh): consume-transform-produce,
  fencing, Admin describeTransactions/listTransactions.
"""

import pathlib
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap, name, partitions=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(10)


def txn_producer(bootstrap, txn_id, **extra):
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "linger.ms": 5,
    }
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(20)
    return p


def read_all(bootstrap, topic, partitions=1, isolation="read_committed", expect=None, wait=10.0):
    """Every record of `topic` a consumer with `isolation` sees, read until the end (or
    until `expect` records arrived, or `wait` seconds passed)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    eof = set()
    deadline = time.time() + wait
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            if expect is None and len(eof) == partitions:
                break
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                if expect is None and len(eof) == partitions:
                    break
            continue
        eof.discard(m.partition())
        out.append(m.value().decode())
        if expect is not None and len(out) >= expect:
            # Linger a little to catch anything that should not be there.
            deadline = min(deadline, time.time() + 1.0)
    c.close()
    return out


def send(p, topic, values, partitions=1):
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % partitions)
    assert p.flush(20) == 0


def test_committed_seen_once_aborted_never(nagare):
    create_topic(nagare.kafka, "tx-basic", partitions=3)
    p = txn_producer(nagare.kafka, "tx-basic-1")
    p.begin_transaction()
    send(p, "tx-basic", [f"c1-{i}" for i in range(30)], partitions=3)
    p.commit_transaction(20)
    p.begin_transaction()
    send(p, "tx-basic", [f"a-{i}" for i in range(30)], partitions=3)
    p.abort_transaction(20)
    p.begin_transaction()
    send(p, "tx-basic", [f"c2-{i}" for i in range(9)], partitions=3)
    p.commit_transaction(20)

    committed = read_all(nagare.kafka, "tx-basic", partitions=3, expect=39)
    assert sorted(committed) == sorted([f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(9)])
    # read_uncommitted sees the aborted records too (never the markers).
    everything = read_all(nagare.kafka, "tx-basic", partitions=3, isolation="read_uncommitted", expect=69)
    assert len(everything) == 69


def test_open_transaction_is_not_visible_until_commit(nagare):
    create_topic(nagare.kafka, "tx-open")
    p = txn_producer(nagare.kafka, "tx-open-1")
    p.begin_transaction()
    send(p, "tx-open", ["x1", "x2"])
    assert read_all(nagare.kafka, "tx-open", wait=2.0) == []
    assert read_all(nagare.kafka, "tx-open", isolation="read_uncommitted", expect=2) == ["x1", "x2"]
    p.commit_transaction(20)
    assert read_all(nagare.kafka, "tx-open", expect=2) == ["x1", "x2"]


def test_second_producer_fences_the_zombie(nagare):
    create_topic(nagare.kafka, "tx-fence")
    zombie = txn_producer(nagare.kafka, "tx-fence-id")
    zombie.begin_transaction()
    send(zombie, "tx-fence", ["zombie-1"])

    # The new instance takes the id over; the zombie's open transaction is aborted.
    fresh = txn_producer(nagare.kafka, "tx-fence-id")
    fresh.begin_transaction()
    send(fresh, "tx-fence", ["fresh-1"])
    fresh.commit_transaction(20)

    with pytest.raises(KafkaException) as info:
        zombie.produce("tx-fence", b"zombie-2", partition=0)
        zombie.flush(10)
        zombie.commit_transaction(10)
    err = info.value.args[0]
    assert err.fatal() or "fenced" in err.str().lower(), err

    assert read_all(nagare.kafka, "tx-fence", expect=1) == ["fresh-1"]


def test_timed_out_transaction_is_aborted(nagare):
    create_topic(nagare.kafka, "tx-timeout")
    p = txn_producer(nagare.kafka, "tx-timeout-id",
                     **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
    p.begin_transaction()
    send(p, "tx-timeout", ["late-1", "late-2"])
    time.sleep(4)
    with pytest.raises(KafkaException):
        p.commit_transaction(10)

    # The LSO moved past the aborted records: a later transaction is visible, they never.
    q = txn_producer(nagare.kafka, "tx-timeout-other")
    q.begin_transaction()
    send(q, "tx-timeout", ["ok-1"])
    q.commit_transaction(20)
    assert read_all(nagare.kafka, "tx-timeout", expect=1) == ["ok-1"]


def committed_offset(bootstrap, group, topic, isolation="read_committed", timeout=10):
    """The group's committed offset. A read_committed consumer asks for stable offsets
    (KIP-447): while a transaction holds an offset for the partition the broker answers
    UNSTABLE_OFFSET_COMMIT and librdkafka retries until `timeout`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": isolation})
    try:
        got = c.committed([TopicPartition(topic, 0)], timeout=timeout)
    finally:
        c.close()
    return got[0].offset


def test_send_offsets_to_transaction_commits_offsets_on_commit_only(nagare):
    create_topic(nagare.kafka, "ctp-in")
    create_topic(nagare.kafka, "ctp-out")
    plain = Producer({"bootstrap.servers": nagare.kafka})
    for i in range(20):
        plain.produce("ctp-in", f"in-{i}".encode(), partition=0)
    assert plain.flush(10) == 0

    consumer = Consumer({
        "bootstrap.servers": nagare.kafka,
        "group.id": "ctp-group",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })
    consumer.subscribe(["ctp-in"])
    producer = txn_producer(nagare.kafka, "ctp-txn")

    def one_round(n):
        producer.begin_transaction()
        got = 0
        deadline = time.time() + 20
        while got < n and time.time() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            producer.produce("ctp-out", m.value().upper(), partition=0)
            got += 1
        assert got == n
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 20)
        producer.flush(10)

    one_round(10)
    # Not committed before the transaction is; unstable for read_committed readers.
    assert committed_offset(nagare.kafka, "ctp-group", "ctp-in", "read_uncommitted") < 0
    with pytest.raises(KafkaException):
        committed_offset(nagare.kafka, "ctp-group", "ctp-in", timeout=2)
    producer.commit_transaction(20)
    assert committed_offset(nagare.kafka, "ctp-group", "ctp-in") == 10

    one_round(10)
    producer.abort_transaction(20)
    assert committed_offset(nagare.kafka, "ctp-group", "ctp-in") == 10
    consumer.close()

    out = read_all(nagare.kafka, "ctp-out", expect=10)
    assert out == [f"IN-{i}" for i in range(10)]


def test_transactions_survive_a_broker_crash(nagare):
    create_topic(nagare.kafka, "tx-crash")
    done = txn_producer(nagare.kafka, "tx-crash-done")
    done.begin_transaction()
    send(done, "tx-crash", ["committed-1", "committed-2"])
    done.commit_transaction(20)

    hung = txn_producer(nagare.kafka, "tx-crash-hung",
                        **{"transaction.timeout.ms": 3000, "message.timeout.ms": 3000})
    hung.begin_transaction()
    send(hung, "tx-crash", ["open-1", "open-2"])

    nagare.restart(sig=signal.SIGKILL)

    # The committed transaction is there; the open one blocks the LSO until the broker
    # aborts it (its timeout runs from its start, across the restart).
    late = txn_producer(nagare.kafka, "tx-crash-late")
    late.begin_transaction()
    send(late, "tx-crash", ["after-1"])
    late.commit_transaction(20)
    got = read_all(nagare.kafka, "tx-crash", expect=3, wait=20)
    assert got == ["committed-1", "committed-2", "after-1"]
    # The hung producer was fenced by the abort.
    with pytest.raises(KafkaException):
        hung.commit_transaction(10)


def test_an_open_transaction_goes_on_across_a_clean_restart(nagare):
    # Produce acknowledges a transaction's records without an fsync (the commit makes them
    # durable); a clean shutdown fsyncs everything, so the transaction is not aborted.
    create_topic(nagare.kafka, "tx-clean")
    p = txn_producer(nagare.kafka, "tx-clean-1")
    p.begin_transaction()
    send(p, "tx-clean", ["before-1", "before-2"])
    nagare.restart(sig=signal.SIGTERM)
    send(p, "tx-clean", ["after-1"])
    p.commit_transaction(20)
    got = read_all(nagare.kafka, "tx-clean", expect=3, wait=20)
    assert got == ["before-1", "before-2", "after-1"]


def test_a_crash_aborts_an_open_transaction_at_once(nagare):
    # After a crash an open transaction's records may be gone (they were acknowledged
    # without an fsync): it is aborted on start, long before its timeout.
    create_topic(nagare.kafka, "tx-crash-now")
    open_ = txn_producer(nagare.kafka, "tx-crash-now-1", **{"transaction.timeout.ms": 600000})
    open_.begin_transaction()
    send(open_, "tx-crash-now", ["open-1"])
    nagare.restart(sig=signal.SIGKILL)
    late = txn_producer(nagare.kafka, "tx-crash-now-2")
    late.begin_transaction()
    send(late, "tx-crash-now", ["after-1"])
    late.commit_transaction(20)
    # Not blocked by the open transaction (its 10-minute timeout is far away).
    assert read_all(nagare.kafka, "tx-crash-now", expect=1, wait=10) == ["after-1"]
    with pytest.raises(KafkaException):
        open_.commit_transaction(10)


JAVA_DIR = pathlib.Path(__file__).resolve().parent / "java" / "target"


def test_java_client_transactions(nagare):
    assert (JAVA_DIR / "classes" / "nagare" / "TxnClientTest.class").is_file(), \
        "run tests/clients/kafka/setup.sh first"
    r = subprocess.run(
        ["java", "-cp", f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*",
         "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "nagare.TxnClientTest", nagare.kafka, "jtx"],
        capture_output=True, timeout=120, text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    for line in ["OK committed round 0", "OK aborted round 1", "OK group offset 10",
                 "OK describe CompleteAbort", "OK zombie fenced", "OK read_committed 11"]:
        assert line in r.stdout, r.stdout
