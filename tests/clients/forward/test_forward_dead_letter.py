"""Refused events are never lost silently: an event larger than its topic's
max.message.bytes goes to the dead-letter topic with its reason and tag, the chunk's
other events to their topic, and the chunk is acknowledged only after both."""

import subprocess
import urllib.request

from fluent import sender

from fwdutil import Conn, event_time, kafka_read, pack, wait_log

BIG = 2 * 1024 * 1024  # beyond the default max.message.bytes (1048588)


def metric(nagare, name):
    text = urllib.request.urlopen(f"http://{nagare.http}/metrics", timeout=10).read().decode()
    return [ln for ln in text.splitlines() if ln.startswith(name)]


def test_fluent_logger_oversized_event_lands_in_the_dead_letter_topic(nagare):
    host, port = nagare.forward
    s = sender.FluentSender("py", host=host, port=port, nanosecond_precision=True, timeout=10)
    try:
        assert s.emit_with_time("dl", event_time(1_700_000_000), {"seq": 0}), s.last_error
        assert s.emit_with_time("dl", event_time(1_700_000_001), {"seq": 1, "blob": "x" * BIG}), \
            s.last_error
        assert s.emit_with_time("dl", event_time(1_700_000_002), {"seq": 2}), s.last_error
    finally:
        s.close()
    good = kafka_read(nagare, "py.dl", 2)
    assert [v for _, v, _ in good] == [b'{"seq":0}', b'{"seq":2}']
    (ts, value, headers), = kafka_read(nagare, "forward.dead-letter", 1)
    assert ts == 1_700_000_001_000
    assert headers["fluent.tag"] == b"py.dl"
    assert headers["dead_letter.reason"] == b"record_too_large"
    assert headers["dead_letter.topic"] == b"py.dl"
    assert b"max.message.bytes 1048588" in headers["dead_letter.error"]
    # 2 MiB does not fit the dead-letter topic either: its first bytes, and the full size.
    full = len(pack({"seq": 1, "blob": "x" * BIG}))
    assert headers["dead_letter.truncated"] == str(full).encode()
    assert 1_000_000 < len(value) < 1_048_588
    assert value.startswith(pack({"seq": 1, "blob": "x" * BIG})[:1000])
    # kcat sees the same letter (headers only: the value is MessagePack).
    r = subprocess.run(
        ["kcat", "-C", "-b", nagare.kafka, "-t", "forward.dead-letter", "-p", "0",
         "-o", "beginning", "-c", "1", "-e", "-q", "-f", "%h\\n"],
        capture_output=True, timeout=20,
    )
    assert r.returncode == 0, r.stderr
    assert b"dead_letter.reason=record_too_large" in r.stdout
    assert b"fluent.tag=py.dl" in r.stdout
    log = wait_log(nagare, "forward event refused")
    assert "record_too_large" in log
    assert any('reason="record_too_large"' in ln and 'protocol="forward"' in ln
               for ln in metric(nagare, "nagare_rejected_total"))


def test_chunk_with_an_oversized_event_is_acked_after_the_dead_letter(nagare):
    big = {"seq": 1, "blob": "y" * 1_200_000}
    entries = [[event_time(1_700_000_000 + i), r] for i, r in
               enumerate([{"seq": 0}, big, {"seq": 2}])]
    c = Conn(nagare.forward)
    try:
        c.send(pack(["raw.dl", entries, {"chunk": "chunk-1"}]))
        assert c.reply() == {"ack": "chunk-1"}
    finally:
        c.close()
    assert [v for _, v, _ in kafka_read(nagare, "raw.dl", 2)] == [b'{"seq":0}', b'{"seq":2}']
    (ts, value, headers), = kafka_read(nagare, "forward.dead-letter", 1)
    assert headers["fluent.tag"] == b"raw.dl"
    assert headers["dead_letter.reason"] == b"record_too_large"
    assert "dead_letter.truncated" in headers
    assert value.startswith(pack(big)[:100])


def test_dead_letter_topic_can_be_disabled(nagare_factory):
    nagare = nagare_factory(env={"NAGARE_FORWARD_DEAD_LETTER_TOPIC": ""})
    c = Conn(nagare.forward)
    try:
        c.send(pack(["nodl.x", [[event_time(1_700_000_000), {"blob": "z" * BIG}],
                                [event_time(1_700_000_001), {"seq": 1}]], {"chunk": "c"}]))
        assert c.reply() == {"ack": "c"}
    finally:
        c.close()
    assert [v for _, v, _ in kafka_read(nagare, "nodl.x", 1)] == [b'{"seq":1}']
    log = wait_log(nagare, "forward event refused")
    assert "dropped" in log
