"""Python fluent-logger (Message mode) into nagare; read back with confluent-kafka and kcat."""

from fluent import sender

from fwdutil import check_events, event_time, kafka_read, kcat_read


def test_fluent_logger_message_mode_read_back_by_kafka_clients(nagare):
    host, port = nagare.forward
    s = sender.FluentSender("py", host=host, port=port, nanosecond_precision=True, timeout=10)
    n = 200
    try:
        for i in range(n):
            ok = s.emit_with_time("app", event_time(1_700_000_000 + i, i * 1000),
                                  {"seq": i, "msg": f"py event {i}"})
            assert ok, s.last_error
    finally:
        s.close()
    records = kafka_read(nagare, "py.app", n)
    check_events(records, "py.app", n, prefix="py event")
    # kcat (librdkafka's CLI) sees the same values, timestamps and headers.
    lines = kcat_read(nagare, "py.app", n)
    for i, (ts, value, headers) in enumerate(lines):
        assert ts == records[i][0]
        assert value.encode() == records[i][1]
        assert "fluent.tag=py.app" in headers


def test_fluent_logger_float_and_integer_times(nagare):
    host, port = nagare.forward
    # Without nanosecond precision the logger sends integer seconds.
    s = sender.FluentSender("secs", host=host, port=port, timeout=10)
    assert s.emit_with_time("x", 1_700_000_123, {"seq": 0, "k": "v"}), s.last_error
    s.close()
    s = sender.FluentSender("flt", host=host, port=port, nanosecond_precision=True, timeout=10)
    assert s.emit_with_time("x", 1_700_000_123.5, {"seq": 0}), s.last_error
    s.close()
    (ts, value, headers), = kafka_read(nagare, "secs.x", 1)
    assert ts == 1_700_000_123_000
    assert headers["fluent.time_ns"] == b"1700000123000000000"
    (ts, value, headers), = kafka_read(nagare, "flt.x", 1)
    assert ts == 1_700_000_123_500
