"""Config and record admin APIs through confluent-kafka's AdminClient (librdkafka):
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, CreateTopics with configs,
DeleteRecords, ListOffsets specs, DescribeTopics, and a topic's compression.type applied
to what producers of every kind send."""

import glob
import pathlib
import socket
import struct
import subprocess
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
)
from confluent_kafka.cimpl import KafkaError

TOPIC = ConfigResource.Type.TOPIC
BROKER = ConfigResource.Type.BROKER


def admin(nagare):
    return AdminClient({"bootstrap.servers": nagare.kafka})


def create(a, name, partitions=1, config=None):
    a.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(10)


def describe(a, kind, name):
    res = ConfigResource(kind, name)
    return a.describe_configs([res])[res].result(10)


def incremental(a, kind, name, *entries, validate_only=False):
    res = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for (k, v, op) in entries])
    return a.incremental_alter_configs([res], validate_only=validate_only)[res].result(10)


def test_create_topics_stores_every_config(nagare):
    a = admin(nagare)
    configs = {
        "compression.type": "snappy",
        "cleanup.policy": "compact,delete",
        "delete.retention.ms": "1000",
        "min.compaction.lag.ms": "10",
        "max.compaction.lag.ms": "100000",
        "min.cleanable.dirty.ratio": "0.1",
        "message.timestamp.type": "CreateTime",
        "segment.jitter.ms": "5",
        "min.insync.replicas": "1",
    }
    create(a, "cfg-all", config=configs)
    got = describe(a, TOPIC, "cfg-all")
    for k, v in configs.items():
        assert got[k].value == v, k
        assert got[k].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, k
        assert not got[k].is_default
    # Defaults are listed too, marked as such.
    assert got["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert got["retention.ms"].is_default
    # validate_only checks the configs and creates nothing.
    a.create_topics([NewTopic("cfg-dry", 1, 1, config={"retention.ms": "5"})], validate_only=True)["cfg-dry"].result(10)
    assert "cfg-dry" not in a.list_topics(timeout=10).topics
    bad = a.create_topics([NewTopic("cfg-bad", 1, 1, config={"cleanup.policy": "shrink"})])["cfg-bad"]
    try:
        bad.result(10)
        raise AssertionError("an invalid cleanup.policy was accepted")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.INVALID_CONFIG
    conflict = a.create_topics([NewTopic("cfg-bad2", 1, 1, config={
        "min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"})])["cfg-bad2"]
    try:
        conflict.result(10)
        raise AssertionError("min.compaction.lag.ms above max was accepted")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.INVALID_CONFIG
    # Overrides survive a restart.
    nagare.restart()
    a = admin(nagare)
    assert describe(a, TOPIC, "cfg-all")["compression.type"].value == "snappy"


def test_incremental_alter_configs_on_a_topic(nagare):
    a = admin(nagare)
    create(a, "inc")
    incremental(a, TOPIC, "inc", ("retention.ms", "60000", AlterConfigOpType.SET),
                ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    got = describe(a, TOPIC, "inc")
    assert got["retention.ms"].value == "60000"
    assert got["cleanup.policy"].value == "compact,delete"
    incremental(a, TOPIC, "inc", ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert describe(a, TOPIC, "inc")["cleanup.policy"].value == "compact"
    incremental(a, TOPIC, "inc", ("retention.ms", None, AlterConfigOpType.DELETE))
    got = describe(a, TOPIC, "inc")
    assert got["retention.ms"].value == "604800000"
    assert got["retention.ms"].is_default
    assert got["cleanup.policy"].value == "compact"
    # validate_only changes nothing; invalid values are refused.
    incremental(a, TOPIC, "inc", ("segment.ms", "1234", AlterConfigOpType.SET), validate_only=True)
    assert describe(a, TOPIC, "inc")["segment.ms"].value == "604800000"
    for entry in [("retention.ms", "abc", AlterConfigOpType.SET),
                  ("retention.ms", "1", AlterConfigOpType.APPEND),
                  ("no.such.config", "1", AlterConfigOpType.SET)]:
        try:
            incremental(a, TOPIC, "inc", entry)
            raise AssertionError(f"{entry} was accepted")
        except KafkaException as e:
            assert e.args[0].code() in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_REQUEST), e
    try:
        incremental(a, TOPIC, "nope", ("retention.ms", "1", AlterConfigOpType.SET))
        raise AssertionError("altered a missing topic")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_legacy_alter_configs_replaces_the_overrides(nagare):
    a = admin(nagare)
    create(a, "legacy", config={"retention.ms": "1000", "segment.bytes": "100000"})
    res = ConfigResource(TOPIC, "legacy", set_config={"max.message.bytes": "5000"})
    a.alter_configs([res])[res].result(10)
    got = describe(a, TOPIC, "legacy")
    assert got["max.message.bytes"].value == "5000"
    assert got["retention.ms"].is_default and got["segment.bytes"].is_default


def test_dynamic_broker_configs_reach_topics_without_override(nagare):
    a = admin(nagare)
    create(a, "follows")
    create(a, "keeps", config={"retention.ms": "1000"})
    node = str(a.describe_cluster(request_timeout=10).result(10).nodes[0].id)
    broker = describe(a, BROKER, node)
    assert broker["log.retention.ms"].value == "604800000"
    assert broker["num.partitions"].is_read_only
    assert broker["log.cleanup.policy"].value == "delete"
    # (librdkafka cannot name the cluster-wide resource ""; the Java test does.)
    incremental(a, BROKER, node, ("log.retention.ms", "7200000", AlterConfigOpType.SET))
    assert broker_source(a, node, "log.retention.ms") == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    follows = describe(a, TOPIC, "follows")["retention.ms"]
    assert follows.value == "7200000"
    assert follows.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert "log.retention.ms" in follows.synonyms
    keeps = describe(a, TOPIC, "keeps")["retention.ms"]
    assert keeps.value == "1000"
    # Synonyms, most specific first (librdkafka keys them by name, so one per name).
    assert list(keeps.synonyms)[:2] == ["retention.ms", "log.retention.ms"]
    assert keeps.synonyms["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Dynamic configs persist over a restart and reach new topics.
    nagare.restart()
    a = admin(nagare)
    assert describe(a, TOPIC, "follows")["retention.ms"].value == "7200000"
    create(a, "newer")
    assert describe(a, TOPIC, "newer")["retention.ms"].value == "7200000"
    # Static settings cannot change at run time.
    try:
        incremental(a, BROKER, node, ("num.partitions", "3", AlterConfigOpType.SET))
        raise AssertionError("num.partitions changed dynamically")
    except KafkaException as e:
        assert e.args[0].code() in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_REQUEST)
    incremental(a, BROKER, node, ("log.retention.ms", None, AlterConfigOpType.DELETE))
    assert describe(a, TOPIC, "follows")["retention.ms"].value == "604800000"


def broker_source(a, node, name):
    return describe(a, BROKER, node)[name].source


def produce(nagare, topic, values, **conf):
    p = Producer({"bootstrap.servers": nagare.kafka, "linger.ms": 5, **conf})
    for v in values:
        p.produce(topic, v)
    assert p.flush(20) == 0


def consume(nagare, topic, count, partition=0, offset=None):
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": f"g-{topic}-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    tp = TopicPartition(topic, partition) if offset is None else TopicPartition(topic, partition, offset)
    c.assign([tp])
    got = []
    deadline = time.time() + 20
    while len(got) < count and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
    c.close()
    return got


def test_delete_records_then_consume_from_the_low_watermark(nagare):
    a = admin(nagare)
    create(a, "dr", config={"segment.bytes": "1024"})
    produce(nagare, "dr", [f"m{i:03d}".encode() * 20 for i in range(100)], **{"linger.ms": 0})
    result = a.delete_records([TopicPartition("dr", 0, 60)])
    low = result[TopicPartition("dr", 0, 60)].result(10)
    assert low.low_watermark == 60
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "dr-g"})
    lo, hi = c.get_watermark_offsets(TopicPartition("dr", 0), timeout=10)
    c.close()
    assert (lo, hi) == (60, 100)
    got = consume(nagare, "dr", 40)
    assert [o for o, _ in got] == list(range(60, 100))
    # Past the high watermark is out of range; -1 means the high watermark.
    try:
        a.delete_records([TopicPartition("dr", 0, 500)])[TopicPartition("dr", 0, 500)].result(10)
        raise AssertionError("deleted past the end")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    nagare.restart()
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "dr-g"})
    assert c.get_watermark_offsets(TopicPartition("dr", 0), timeout=10)[0] == 60
    c.close()


def test_list_offsets_specs(nagare):
    a = admin(nagare)
    create(a, "lo")
    p = Producer({"bootstrap.servers": nagare.kafka})
    base = int(time.time() * 1000) - 100_000
    for i, ts in enumerate([base + 10, base + 50, base + 30, base + 20]):
        p.produce("lo", f"v{i}".encode(), timestamp=ts)
        p.flush(10)
    tp = TopicPartition("lo", 0)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "at": OffsetSpec.for_timestamp(base + 25)}
    out = {}
    for name, spec in specs.items():
        out[name] = a.list_offsets({tp: spec})[tp].result(10)
    assert out["earliest"].offset == 0
    assert out["latest"].offset == 4
    assert (out["max"].offset, out["max"].timestamp) == (1, base + 50)
    assert out["at"].offset == 1
    from confluent_kafka import IsolationLevel
    committed = a.list_offsets({tp: OffsetSpec.latest()},
                               isolation_level=IsolationLevel.READ_COMMITTED)[tp].result(10)
    assert committed.offset == 4


def test_describe_topics(nagare):
    a = admin(nagare)
    create(a, "dt", partitions=3)
    from confluent_kafka import TopicCollection
    d = a.describe_topics(TopicCollection(["dt"]))["dt"].result(10)
    assert d.name == "dt" and len(d.partitions) == 3
    assert all(p.leader.id == d.partitions[0].leader.id for p in d.partitions)


def batch_codecs(path):
    """The codec of every record batch of a segment file (attributes' low 3 bits)."""
    data = pathlib.Path(path).read_bytes()
    codecs, pos = [], 0
    while pos + 61 <= len(data):
        length = struct.unpack(">i", data[pos + 8:pos + 12])[0]
        attributes = struct.unpack(">h", data[pos + 21:pos + 23])[0]
        codecs.append(attributes & 7)
        pos += 12 + length
    return codecs


def stomp_read(nagare, topic, count):
    """Subscribes to /topic/<topic> from the start and returns the message bodies."""
    s = socket.create_connection(nagare.stomp, timeout=10)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    buf = b""

    def frame():
        nonlocal buf
        while b"\x00" not in buf:
            chunk = s.recv(65536)
            assert chunk, "STOMP connection closed"
            buf += chunk
        f, buf = buf.split(b"\x00", 1)
        buf = buf.lstrip(b"\r\n")
        return f

    assert frame().startswith(b"CONNECTED")
    s.sendall(f"SUBSCRIBE\nid:1\ndestination:/topic/{topic}\nack:auto\nx-stream-offset:first\n\n\x00".encode())
    bodies = []
    while len(bodies) < count:
        f = frame()
        if f.startswith(b"MESSAGE"):
            bodies.append(f.split(b"\n\n", 1)[1])
    s.close()
    return bodies


def test_topic_compression_type_recompresses_every_front_end(nagare):
    a = admin(nagare)
    create(a, "gz", config={"compression.type": "gzip"})
    values = [f"record {i} ".encode() * 10 for i in range(20)]
    produce(nagare, "gz", values[:10], **{"compression.type": "none"})
    produce(nagare, "gz", values[10:], **{"compression.type": "lz4"})
    # STOMP SEND goes through the same append path.
    s = socket.create_connection(nagare.stomp, timeout=10)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    s.recv(4096)
    s.sendall(b"SEND\ndestination:/topic/gz\nreceipt:r1\n\nfrom stomp\x00")
    assert b"RECEIPT" in s.recv(4096)
    s.close()
    segments = sorted(glob.glob(str(nagare.data_dir / "gz-0" / "*.log")))
    codecs = [c for seg in segments for c in batch_codecs(seg)]
    assert codecs and set(codecs) == {1}, codecs
    got = consume(nagare, "gz", 21)
    assert [v for _, v in got] == values + [b"from stomp"]
    assert stomp_read(nagare, "gz", 21)[:20] == values
    # The codec can change later: new batches follow it.
    incremental(a, TOPIC, "gz", ("compression.type", "zstd", AlterConfigOpType.SET))
    produce(nagare, "gz", [b"late"], **{"compression.type": "gzip"})
    codecs = [c for seg in sorted(glob.glob(str(nagare.data_dir / "gz-0" / "*.log"))) for c in batch_codecs(seg)]
    assert codecs[-1] == 4
    assert consume(nagare, "gz", 22)[-1][1] == b"late"


def test_java_admin_client(nagare):
    """describeTopics (DescribeTopicPartitions, paged), listOffsets maxTimestamp /
    earliestLocal / latestTiered, deleteRecords, describeLogDirs and the cluster-wide
    broker resource "" through kafka-clients 4.3.1's Admin."""
    java_dir = pathlib.Path(__file__).resolve().parent / "java" / "target"
    classpath = f"{java_dir / 'classes'}:{java_dir / 'lib'}/*"
    assert (java_dir / "classes" / "nagare" / "AdminConfigsTest.class").is_file(), \
        "run tests/clients/kafka/setup.sh first"
    r = subprocess.run(
        ["java", "-cp", classpath, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "nagare.AdminConfigsTest", nagare.kafka],
        capture_output=True, timeout=120, text=True)
    assert r.returncode == 0 and "OK admin" in r.stdout, r.stdout + r.stderr


def test_log_append_time_replaces_producer_timestamps(nagare):
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    a = admin(nagare)
    create(a, "lat", config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": nagare.kafka})
    p.produce("lat", b"old", timestamp=1000)
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "lat-g", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("lat", 0, 0)])
    m = None
    deadline = time.time() + 20
    while m is None and time.time() < deadline:
        m = c.poll(0.5)
    c.close()
    assert m is not None and not m.error()
    kind, ts = m.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= ts <= int(time.time() * 1000) + 1000
