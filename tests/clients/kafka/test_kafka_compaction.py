"""Log compaction with a real client (confluent-kafka / librdkafka): keyed data to a
topic with cleanup.policy=compact reads back as the latest record per key, at the
offsets it was written at, once the cleaner has run; tombstones delete keys; records
without a key are refused with INVALID_RECORD."""

import re
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# The cleaner looks for work every 200 ms and segments roll after 1 s (checked every
# 100 ms), so a test sees a clean within a few seconds.
FAST = {"NAGARE_LOG_CLEANER_BACKOFF_MS": "200", "NAGARE_MAINTENANCE_INTERVAL_MS": "100"}


def create(bootstrap, topic, **config):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cfg = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "1000",
           "min.cleanable.dirty.ratio": "0.01"}
    cfg.update(config)
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=cfg)]).values():
        f.result(10)


def read_all(bootstrap, topic, timeout=10):
    """Every record from the start to the end of the log: (offset, key, value)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error() is not None:
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            break
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def produce(bootstrap, topic, records):
    """Produces (key, value) pairs in order; returns the offset of each."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 20})
    offsets = [None] * len(records)
    errors = []

    def done(i):
        def cb(err, msg):
            if err:
                errors.append(err)
            else:
                offsets[i] = msg.offset()
        return cb

    for i, (k, v) in enumerate(records):
        p.produce(topic, v, k, partition=0, on_delivery=done(i))
        p.poll(0)
    assert p.flush(20) == 0
    assert errors == []
    return offsets


def wait_compacted(bootstrap, topic, expected, timeout=30):
    """Waits until reading the topic gives exactly `expected` ({key: (offset, value)})."""
    deadline = time.time() + timeout
    while True:
        got = read_all(bootstrap, topic)
        latest = {k: (o, v) for o, k, v in got}
        if len(got) == len(expected) and latest == expected:
            return got
        if time.time() > deadline:
            raise AssertionError(f"not compacted: {len(got)} records, want {len(expected)}")
        time.sleep(0.5)


def test_keyed_data_compacts_to_the_latest_record_per_key(nagare_factory):
    n = nagare_factory(env=FAST)
    topic = "compacted-" + uuid.uuid4().hex[:8]
    # Tombstones stay 10 s once cleaned: long enough to see one, short enough to wait.
    create(n.kafka, topic, **{"delete.retention.ms": "10000"})
    records = [(f"key-{i % 40}".encode(), f"value {r} {'x' * 60}".encode())
               for r in range(15) for i in range(40)]
    # A key deleted by a tombstone at the end.
    records.append((b"key-7", None))
    offsets = produce(n.kafka, topic, records)
    assert offsets == list(range(len(records)))
    # The active segment is compacted once it rolls (segment.ms), so wait for that.
    expected = {}
    for (k, v), o in zip(records, offsets):
        expected[k] = (o, v)
    # The tombstone is kept at first (delete.retention.ms counts from its first clean).
    got = wait_compacted(n.kafka, topic, expected)
    assert [o for o, _, _ in got] == sorted(o for o, _ in expected.values())
    # Once delete.retention.ms has passed since its first clean, a pass drops the
    # tombstone (the cleaner runs one at that horizon even with nothing dirty); more data
    # is compacted meanwhile.
    more = [(f"key-{i}".encode(), b"again") for i in range(40) if i != 7]
    offsets = produce(n.kafka, topic, more)
    for (k, v), o in zip(more, offsets):
        expected[k] = (o, v)
    del expected[b"key-7"]
    wait_compacted(n.kafka, topic, expected, timeout=45)
    # Reading from an offset that compaction removed starts at the next record.
    c = Consumer({"bootstrap.servers": n.kafka, "group.id": "g-" + uuid.uuid4().hex,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 5)])
    m = None
    deadline = time.time() + 10
    while m is None and time.time() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m is not None and m.error() is None
    assert m.offset() == min(o for o, _ in expected.values())
    # And it all survives a restart.
    n.restart()
    assert {k: (o, v) for o, k, v in read_all(n.kafka, topic)} == expected


def test_keyless_records_are_refused_on_a_compacted_topic(nagare_factory):
    n = nagare_factory(env=FAST)
    topic = "compacted-nokey-" + uuid.uuid4().hex[:8]
    create(n.kafka, topic)
    p = Producer({"bootstrap.servers": n.kafka, "linger.ms": 0})
    results = []
    # (Separate batches: Kafka refuses a whole batch holding a keyless record.)
    p.produce(topic, b"no key", partition=0, on_delivery=lambda err, msg: results.append(err))
    assert p.flush(20) == 0
    p.produce(topic, b"keyed", b"k", partition=0, on_delivery=lambda err, msg: results.append(err))
    assert p.flush(20) == 0
    assert results[0] is not None and results[0].code() == KafkaError.INVALID_RECORD, results
    assert results[1] is None
    assert [(k, v) for _, k, v in read_all(n.kafka, topic)] == [(b"k", b"keyed")]
    # The same record goes to a topic that is not compacted.
    admin = AdminClient({"bootstrap.servers": n.kafka})
    admin.create_topics([NewTopic("plain-" + topic, 1, 1)])["plain-" + topic].result(10)
    p.produce("plain-" + topic, b"no key", partition=0,
              on_delivery=lambda err, msg: results.append(err))
    assert p.flush(20) == 0
    assert results[2] is None


def markers_removed(n):
    """Transaction markers the cleaner reported removing, from the broker's log."""
    text = (n.data_dir.parent / "nagare.log").read_text(errors="replace")
    return sum(int(x) for x in re.findall(r"markers_removed=(\d+)", text))


def test_transaction_markers_go_once_their_data_has(nagare_factory):
    """An ABORT and a COMMIT marker whose records are all compacted away are removed
    after delete.retention.ms, the ABORT one's index entry with it: a later transaction
    of the same producer still reads (a stale entry would hide it from read_committed)."""
    n = nagare_factory(env=FAST)
    topic = "compacted-txn-" + uuid.uuid4().hex[:8]
    create(n.kafka, topic, **{"delete.retention.ms": "1000"})
    p = Producer({"bootstrap.servers": n.kafka, "transactional.id": "tx-" + uuid.uuid4().hex,
                  "linger.ms": 0})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce(topic, b"aborted", b"a", partition=0)
    p.flush(10)
    p.abort_transaction(10)
    p.begin_transaction()
    p.produce(topic, b"old", b"c", partition=0)
    p.commit_transaction(10)
    # Overwritten outside the transaction: the committed transaction's data goes too.
    produce(n.kafka, topic, [(b"c", b"new")])
    deadline = time.time() + 40
    while markers_removed(n) < 2:
        assert time.time() < deadline, "markers never removed"
        time.sleep(0.5)
    p.begin_transaction()
    p.produce(topic, b"later", b"b", partition=0)
    p.commit_transaction(10)
    got = {k: v for _, k, v in read_all(n.kafka, topic)}
    assert got == {b"c": b"new", b"b": b"later"}, got
    n.restart()
    got = {k: v for _, k, v in read_all(n.kafka, topic)}
    assert got == {b"c": b"new", b"b": b"later"}, got
