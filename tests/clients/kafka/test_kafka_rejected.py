"""Refused record batches are visible three ways: the Kafka error the client sees, a warn
line naming the reason (at most one a second per reason, with a count of the lines kept
quiet), and nagare_rejected_total{protocol="kafka",reason} on /metrics."""

import time
import urllib.request

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def rejected(nagare, reason):
    text = urllib.request.urlopen(f"http://{nagare.http}/metrics", timeout=10).read().decode()
    for ln in text.splitlines():
        if ln.startswith("nagare_rejected_total{") and 'protocol="kafka"' in ln \
                and f'reason="{reason}"' in ln:
            return float(ln.rsplit(" ", 1)[1])
    return 0.0


def test_record_over_max_message_bytes_is_refused_logged_and_counted(nagare):
    admin = AdminClient({"bootstrap.servers": nagare.kafka})
    admin.create_topics([NewTopic("tiny", 1, 1, config={"max.message.bytes": "2000"})])["tiny"].result(10)
    # retries=0: each refused record is one produce request, so one refusal each.
    p = Producer({"bootstrap.servers": nagare.kafka, "message.max.bytes": 100000,
                  "retries": 0, "linger.ms": 0})
    errors = []
    for _ in range(5):
        p.produce("tiny", b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
        p.flush(20)
    assert len(errors) == 5
    assert all(e is not None and e.code() == KafkaError.MSG_SIZE_TOO_LARGE for e in errors), errors
    assert rejected(nagare, "record_too_large") == 5
    # Five refusals within a second: one line, the rest kept quiet.
    lines = [ln for ln in nagare.read_log().splitlines() if "kafka record batch refused" in ln]
    assert len(lines) == 1, lines
    assert "record_too_large" in lines[0] and "tiny" in lines[0], lines[0]
    # The next refusal after the interval is logged with the number kept quiet.
    time.sleep(1.1)
    p.produce("tiny", b"x" * 5000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors[-1] is not None and errors[-1].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert rejected(nagare, "record_too_large") == 6
    lines = [ln for ln in nagare.read_log().splitlines() if "kafka record batch refused" in ln]
    assert len(lines) == 2, lines
    assert "similar_not_logged=4" in lines[1], lines[1]
    # A record that fits is still accepted; nothing else was counted.
    p.produce("tiny", b"ok", on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors[-1] is None
    assert rejected(nagare, "record_too_large") == 6
