"""`/metrics` after real traffic from real clients: confluent-kafka (produce, a consumer
group with a commit, fetch), stomp.py (a queue, a topic, a temp queue), fluent-logger
and a raw forward chunk with its ack. Every family the issue lists must be there with
HELP and TYPE and plausible values, and every metric the Grafana dashboard queries must
exist."""

import json
import pathlib
import re
import socket
import time

import msgpack
import stomp
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from fluent import sender

from metrics_util import scrape

DASHBOARD = pathlib.Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "nagare.json"

# Every family the issue asks for (and this test's traffic makes appear).
REQUIRED = [
    # connections
    "nagare_connections_open", "nagare_connections_accepted_total",
    "nagare_connections_closed_total",
    # traffic
    "nagare_topic_records_in_total", "nagare_topic_bytes_in_total",
    "nagare_topic_records_out_total", "nagare_topic_bytes_out_total",
    "nagare_records_in_total", "nagare_bytes_in_total", "nagare_records_out_total",
    "nagare_bytes_out_total",
    # kafka
    "nagare_kafka_requests_total", "nagare_kafka_request_duration_seconds",
    "nagare_kafka_errors_total",
    # log
    "nagare_log_fsyncs_total", "nagare_log_fsync_duration_seconds",
    "nagare_log_fsync_size_bytes",
    # partitions
    "nagare_partition_log_start_offset", "nagare_partition_log_end_offset",
    "nagare_partition_size_bytes", "nagare_partition_segments",
    # groups
    "nagare_group_state", "nagare_group_members", "nagare_group_lag",
    "nagare_group_committed_offset",
    # stomp
    "nagare_stomp_frames_received_total", "nagare_stomp_messages_sent_total",
    "nagare_stomp_subscriptions", "nagare_stomp_temp_queues", "nagare_queue_depth",
    "nagare_queue_unacked", "nagare_queue_consumers", "nagare_queue_redeliveries_total",
    # forward
    "nagare_forward_events_total", "nagare_forward_chunks_total", "nagare_forward_acks_total",
    "nagare_forward_decode_errors_total", "nagare_forward_route_events_total",
    "nagare_forward_route_bytes_total", "nagare_forward_route_dead_lettered_total",
    # process
    "process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total",
    "process_max_fds", "process_start_time_seconds",
]

CONFIG = """
[[forward.route]]
match = "app.**"
topic = "app-logs"
"""


def kafka_traffic(nagare, topic, group):
    p = Producer({"bootstrap.servers": nagare.kafka, "acks": "all", "linger.ms": 5})
    for i in range(50):
        p.produce(topic, key=f"k{i}", value=f"v{i}")
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.time() + 30
    while got < 50 and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
    assert got == 50
    c.commit(asynchronous=False)
    c.close()
    # Five more after the commit: the group lags by five.
    for i in range(5):
        p.produce(topic, value=f"late{i}")
    assert p.flush(20) == 0
    # A certain error code: deleting a topic that does not exist.
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    try:
        admin.delete_topics(["m-no-such-topic"])["m-no-such-topic"].result(timeout=20)
        raise AssertionError("deleted a topic that does not exist")
    except KafkaException as e:
        assert e.args[0].name() == "UNKNOWN_TOPIC_OR_PART", e


class Inbox(stomp.ConnectionListener):
    def __init__(self):
        self.messages = []

    def on_message(self, frame):
        self.messages.append(frame)


def stomp_traffic(nagare):
    conn = stomp.Connection12([nagare.stomp], heartbeats=(0, 0))
    inbox = Inbox()
    conn.set_listener("m", inbox)
    conn.connect(wait=True)
    conn.subscribe("/queue/m-queue", id="q", ack="client-individual")
    conn.subscribe("/topic/m-topic", id="t")
    conn.subscribe("/temp-queue/m-replies", id="tmp")
    for i in range(3):
        conn.send("/queue/m-queue", f"q{i}", receipt=f"rq{i}")
        conn.send("/topic/m-topic", f"t{i}")
    deadline = time.time() + 10
    while len(inbox.messages) < 6 and time.time() < deadline:
        time.sleep(0.05)
    assert len(inbox.messages) >= 6, [m.body for m in inbox.messages]
    return conn


def forward_traffic(nagare):
    host, port = nagare.forward
    s = sender.FluentSender("app", host=host, port=port, timeout=10)
    for i in range(4):
        assert s.emit("web", {"seq": i}), s.last_error
    s.close()
    # A chunk asks for an ack.
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(msgpack.packb(["app.api", int(time.time()), {"x": 1}, {"chunk": "c1"}]))
        unpacker = msgpack.Unpacker(raw=False)
        while True:
            data = sock.recv(4096)
            assert data, "no ack"
            unpacker.feed(data)
            acks = list(unpacker)
            if acks:
                assert acks[0] == {"ack": "c1"}
                break
    # Garbage: a decode error closes that connection.
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"\xc1\xc1\xc1 not msgpack")
        sock.settimeout(10)
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass


def test_metrics_after_real_traffic(nagare_factory, tmp_path):
    cfg = tmp_path / "nagare.toml"
    cfg.write_text(CONFIG)
    nagare = nagare_factory(extra_args=["--config", str(cfg)])
    kafka_traffic(nagare, "m-orders", "m-group")
    conn = stomp_traffic(nagare)
    forward_traffic(nagare)
    try:
        # fluent-logger's connection is closed before the next one opens, but the broker
        # may serve it after them (its own task): wait, bounded, for its four events.
        deadline = time.time() + 10
        s = scrape(nagare)
        while s.total("nagare_topic_records_in_total", topic="app-logs") < 5 \
                and time.time() < deadline:
            time.sleep(0.05)
            s = scrape(nagare)
    finally:
        conn.disconnect()

    for name in REQUIRED:
        assert name in s.type, f"{name}: no TYPE line"
        assert name in s.help, f"{name}: no HELP line"
    # Names follow the conventions: counters end in _total, no unit-less durations.
    for name, kind in s.type.items():
        if kind == "counter":
            assert name.endswith("_total"), name
        assert not name.endswith("_ms"), name

    # Records in are exactly what was produced, counted once on the append path.
    assert s.values("nagare_topic_records_in_total", topic="m-orders") == [55]
    assert s.total("nagare_topic_bytes_in_total", topic="m-orders") > 55 * 2
    assert s.total("nagare_topic_records_out_total", topic="m-orders") >= 50
    assert s.values("nagare_records_in_total")[0] >= 55 + 6 + 5, [
        (labels, v) for n, labels, v in s.samples if n == "nagare_topic_records_in_total"]
    assert s.values("nagare_partition_log_end_offset", topic="m-orders", partition=0) == [55]
    assert s.values("nagare_partition_segments", topic="m-orders", partition=0)[0] >= 1
    assert s.values("nagare_partition_size_bytes", topic="m-orders", partition=0)[0] > 0

    # Kafka requests by API and version, latency histograms with buckets, and errors.
    assert s.total("nagare_kafka_requests_total", api="Produce") >= 1
    assert s.total("nagare_kafka_requests_total", api="Fetch") >= 1
    assert s.total("nagare_kafka_requests_total", api="OffsetCommit") >= 1
    assert all(l.get("version", "").isdigit()
               for n, l, _ in s.samples if n == "nagare_kafka_requests_total")
    assert s.type["nagare_kafka_request_duration_seconds"] == "histogram"
    assert s.total("nagare_kafka_request_duration_seconds_count", api="Produce") >= 1
    assert s.values("nagare_kafka_request_duration_seconds_bucket", api="Produce", le="+Inf")
    assert s.total("nagare_kafka_errors_total", error="UnknownTopicOrPartition", code=3) >= 1

    # acks=all under the default flush policy: fsyncs happened, with their sizes.
    assert s.values("nagare_log_fsyncs_total")[0] > 0
    assert s.total("nagare_log_fsync_duration_seconds_count") > 0
    assert s.total("nagare_log_fsync_size_bytes_sum") > 0

    # The group committed 50 of 55: lag 5, Empty once its consumer left.
    assert s.total("nagare_group_lag", group="m-group", topic="m-orders") == 5
    assert s.values("nagare_group_committed_offset", group="m-group", topic="m-orders",
                    partition=0) == [50]
    assert s.values("nagare_group_state", group="m-group", state="Empty") == [1]
    assert s.values("nagare_group_members", group="m-group") == [0]

    # STOMP: frames by command, open subscriptions, queue gauges, a temp queue.
    assert s.values("nagare_stomp_frames_received_total", command="SEND")[0] >= 6
    assert s.values("nagare_stomp_frames_received_total", command="SUBSCRIBE")[0] >= 3
    assert s.values("nagare_stomp_subscriptions", kind="queue")[0] >= 1
    assert s.values("nagare_stomp_temp_queues")[0] >= 1
    assert s.values("nagare_queue_consumers", queue="m-queue") == [1]
    assert s.values("nagare_queue_unacked", queue="m-queue") == [3]
    assert s.total("nagare_stomp_messages_sent_total") >= 6

    # Forward: events, the chunk and its ack, the decode error, per-route counts.
    assert s.values("nagare_forward_events_total")[0] >= 5
    assert s.values("nagare_forward_chunks_total")[0] >= 1
    assert s.values("nagare_forward_acks_total")[0] >= 1
    assert s.values("nagare_forward_decode_errors_total")[0] >= 1
    assert s.values("nagare_forward_route_events_total", route="app.**") == [5]
    assert s.values("nagare_forward_route_dead_lettered_total", route="app.**") == [0]

    # Connections per protocol and listener; the process itself.
    assert s.values("nagare_connections_open", protocol="http", listener="http")[0] >= 1
    assert s.total("nagare_connections_accepted_total", protocol="kafka") >= 1
    assert s.values("process_resident_memory_bytes")[0] > 1_000_000
    assert s.values("process_open_fds")[0] > 5
    assert s.values("process_cpu_seconds_total")[0] > 0

    # Every metric the Grafana dashboard queries is in the scrape.
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    families = s.families()
    for expr in exprs:
        for name in re.findall(r"\b((?:nagare|process)_[a-z0-9_]+)", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in families or base in families, f"dashboard uses {name}: not scraped"
