"""Fluentd forward into a gateway (fluent-logger), read back straight from the Kafka cluster
with confluent-kafka: the route's topic, the record as JSON, the tag in `fluent.tag`."""

import json
import time

from fluent import sender

from clusterutil import uid


def test_forwarded_events_are_read_back_from_the_cluster(kafka_cluster, gateway_factory):
    u = uid()
    topic = f"app-logs-{u}"
    a = gateway_factory(1, config=f'[[forward.route]]\nmatch = "app.**"\ntopic = "{topic}"\n')
    host, port = a.forward
    tag = f"app.orders.{u}"
    s = sender.FluentSender("app", host=host, port=port, nanosecond_precision=True, timeout=10)
    n = 300
    t0 = int(time.time())
    try:
        for i in range(n):
            assert s.emit_with_time(f"orders.{u}", sender.EventTime(t0 + i, i * 1000),
                                    {"seq": i, "msg": f"order {i}"}), s.last_error
    finally:
        s.close()

    deadline = time.time() + 30
    records = []
    while len(records) < n and time.time() < deadline:
        try:
            records = kafka_cluster.read_topic(topic)
        except KeyError:  # the topic does not exist yet
            pass
        if len(records) < n:
            time.sleep(0.5)
    assert len(records) == n, f"read {len(records)} of {n} events from {topic}"
    # One tag's events stay in order (partition 0 of the route's topic).
    assert {p for p, _, _, _, _ in records} == {0}
    for i, (_, _, _, value, headers) in enumerate(sorted(records, key=lambda r: r[1])):
        assert json.loads(value) == {"seq": i, "msg": f"order {i}"}
        assert headers["fluent.tag"] == tag.encode()
        assert headers["fluent.time_ns"] == str((t0 + i) * 10**9 + i * 1000).encode()
