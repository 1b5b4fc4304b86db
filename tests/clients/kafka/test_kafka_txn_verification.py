"""KIP-890 part 1 (transaction.partition.verification.enable, on by default): a
transactional batch for a partition the producer never added to its transaction is
refused with INVALID_TXN_STATE and nothing is stored. Clients never send such a batch
on purpose, so this speaks the protocol directly: InitProducerId v1, AddPartitionsToTxn
v1, Produce v7 and EndTxn v1 encoded here, the record batch built by kafka-python's
DefaultRecordBatchBuilder. The clients' own transactional tests are
test_kafka_transactions.py."""

import socket
import struct
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

INVALID_TXN_STATE = 48
NOT_ENOUGH_REPLICAS = 19


def string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Raw:
    """One connection sending non-flexible requests (request header v1)."""

    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = 0

    def call(self, api_key, version, body):
        self.correlation += 1
        msg = struct.pack(">hhi", api_key, version, self.correlation) + string("kip890") + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self.read(4))[0]
        data = self.read(size)
        assert struct.unpack(">i", data[:4])[0] == self.correlation
        return data[4:]

    def read(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "connection closed"
            out += chunk
        return out

    def init_producer_id(self, txn_id):
        body = string(txn_id) + struct.pack(">i", 60000)
        _, error, pid, epoch = struct.unpack(">ihqh", self.call(22, 1, body))
        assert error == 0, error
        return pid, epoch

    def add_partitions(self, txn_id, pid, epoch, topic, partition):
        body = (string(txn_id) + struct.pack(">qhi", pid, epoch, 1) + string(topic)
                + struct.pack(">ii", 1, partition))
        data = self.call(24, 1, body)
        # throttle, [topic name, [partition, error]]: one of each.
        name_len = struct.unpack(">h", data[8:10])[0]
        _, error = struct.unpack(">ih", data[10 + name_len + 4:10 + name_len + 10])
        assert error == 0, error

    def produce(self, txn_id, topic, partition, pid, epoch, sequence):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=0, is_transactional=True, producer_id=pid,
            producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20)
        builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"v", headers=[])
        records = bytes(builder.build())
        body = (string(txn_id) + struct.pack(">hii", -1, 10000, 1) + string(topic)
                + struct.pack(">iii", 1, partition, len(records)) + records)
        data = self.call(0, 7, body)
        # [topic name, [index, error, base offset, append time, log start]], throttle
        name_len = struct.unpack(">h", data[4:6])[0]
        _, error = struct.unpack(">ih", data[6 + name_len + 4:6 + name_len + 10])
        return error

    def end_txn(self, txn_id, pid, epoch, commit):
        body = string(txn_id) + struct.pack(">qh?", pid, epoch, commit)
        _, error = struct.unpack(">ih", self.call(26, 1, body))
        return error


def high_watermark(bootstrap, topic, partition):
    # read_uncommitted: the high watermark, open transactions included (not the LSO).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw",
                  "isolation.level": "read_uncommitted"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        c.close()


def test_batch_for_a_partition_outside_the_transaction_is_refused(nagare):
    topic, txn_id = f"kv-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(10)
    raw = Raw(nagare.kafka)
    pid, epoch = raw.init_producer_id(txn_id)
    # No AddPartitionsToTxn yet: the coordinator has no such partition in a transaction.
    assert raw.produce(txn_id, topic, 0, pid, epoch, 0) == INVALID_TXN_STATE
    assert high_watermark(nagare.kafka, topic, 0) == 0
    raw.add_partitions(txn_id, pid, epoch, topic, 0)
    assert raw.produce(txn_id, topic, 0, pid, epoch, 0) == 0
    # The transaction is open here now: later batches are not checked again.
    assert raw.produce(txn_id, topic, 0, pid, epoch, 1) == 0
    # Partition 1 was never added.
    assert raw.produce(txn_id, topic, 1, pid, epoch, 0) == INVALID_TXN_STATE
    assert high_watermark(nagare.kafka, topic, 1) == 0
    assert raw.end_txn(txn_id, pid, epoch, True) == 0
    # After the commit, a late batch of the ended transaction cannot open a new one.
    deadline = time.time() + 10
    while high_watermark(nagare.kafka, topic, 0) < 3 and time.time() < deadline:
        time.sleep(0.1)
    assert high_watermark(nagare.kafka, topic, 0) == 3  # two records and the marker
    # (NOT_ENOUGH_REPLICAS, retriable, while the coordinator is still completing it.)
    error = raw.produce(txn_id, topic, 0, pid, epoch, 2)
    while error == NOT_ENOUGH_REPLICAS and time.time() < deadline:
        time.sleep(0.1)
        error = raw.produce(txn_id, topic, 0, pid, epoch, 2)
    assert error == INVALID_TXN_STATE
    assert high_watermark(nagare.kafka, topic, 0) == 3


def test_verification_can_be_turned_off(nagare_factory):
    # transaction.partition.verification.enable=false: the batch is taken as before KIP-890.
    n = nagare_factory(env={"NAGARE_KAFKA_TRANSACTION_PARTITION_VERIFICATION_ENABLE": "false"})
    topic, txn_id = f"kv-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": n.kafka})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    raw = Raw(n.kafka)
    pid, epoch = raw.init_producer_id(txn_id)
    assert raw.produce(txn_id, topic, 0, pid, epoch, 0) == 0
    assert high_watermark(n.kafka, topic, 0) == 1
