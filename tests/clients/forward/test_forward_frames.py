"""Hand-built forward frames for every edge of the protocol, over a real socket, read
back with confluent-kafka: time forms, str vs bin entries, gzip as str, zstd-less text,
the chunk id with a trailing newline, nil and UDP heartbeats, garbage, a bomb, an
oversized chunk, routing from a config file."""

import json
import socket
import time

import msgpack

from fwdutil import (Conn, entries, event_time, gzipped, kafka_read, pack, str_header,
                     wait_log, write_config)


def rec(i):
    return {"seq": i, "msg": f"frame event {i}"}


def test_message_mode_time_forms(nagare):
    c = Conn(nagare.forward)
    times = [
        (1_700_000_001, 1_700_000_001_000, "1700000001000000000"),
        (1_700_000_002.25, 1_700_000_002_250, "1700000002250000000"),
        (event_time(1_700_000_003, 987_654_321), 1_700_000_003_987, "1700000003987654321"),
        ([event_time(1_700_000_004, 5), {"meta": 1}], 1_700_000_004_000, "1700000004000000005"),
    ]
    for i, (t, _, _) in enumerate(times):
        c.send(pack(["frames.time", t, rec(i), {"chunk": f"t{i}"}]))
        assert c.reply() == {"ack": f"t{i}"}
    # EventTime as ext8 (0xc7, length 8, type 0) instead of fixext8.
    ext8 = b"\xc7\x08\x00" + (1_700_000_005).to_bytes(4, "big") + (6).to_bytes(4, "big")
    c.send(b"\x94" + pack("frames.time") + ext8 + pack(rec(4)) + pack({"chunk": "t4"}))
    assert c.reply() == {"ack": "t4"}
    c.close()
    got = kafka_read(nagare, "frames.time", 5)
    for (ts, value, headers), (_, want_ts, want_ns) in zip(got, times):
        assert ts == want_ts
        assert headers["fluent.time_ns"] == want_ns.encode()
    assert got[4][2]["fluent.time_ns"] == b"1700000005000000006"
    assert [json.loads(v)["seq"] for _, v, _ in got] == [0, 1, 2, 3, 4]


def test_forward_and_packed_entries_as_bin_and_str_and_gzip_as_str(nagare):
    c = Conn(nagare.forward)
    evs = [(event_time(1_700_000_000 + i, i), rec(i)) for i in range(30)]
    # Forward mode, with Fluent Bit's [[time, {}], record] entries for half of them.
    fwd = [[t, r] if i % 2 else [[t, {}], r] for i, (t, r) in enumerate(evs[:10])]
    c.send(pack(["frames.modes", fwd, {"chunk": "fwd"}]))
    assert c.reply() == {"ack": "fwd"}
    # PackedForward as bin.
    c.send(pack(["frames.modes", entries(evs[10:20]), {"chunk": "bin", "size": 10}]))
    assert c.reply() == {"ack": "bin"}
    # PackedForward as str (old msgpack senders), and gzip inside a str (Fluentd does).
    raw = entries(evs[20:25])
    c.send(b"\x93" + pack("frames.modes") + str_header(len(raw)) + raw + pack({"chunk": "str"}))
    assert c.reply() == {"ack": "str"}
    gz = gzipped(entries(evs[25:30]))
    c.send(b"\x93" + pack("frames.modes") + str_header(len(gz)) + gz
           + pack({"chunk": "gz", "compressed": "gzip"}))
    assert c.reply() == {"ack": "gz"}
    c.close()
    got = kafka_read(nagare, "frames.modes", 30)
    assert [json.loads(v)["seq"] for _, v, _ in got] == list(range(30))
    assert [h["fluent.time_ns"] for _, _, h in got] == [
        str((1_700_000_000 + i) * 10**9 + i).encode() for i in range(30)]


def test_chunk_id_is_echoed_byte_for_byte(nagare):
    c = Conn(nagare.forward)
    chunk = "MTY5OTk5OTk5OS4xMjM0NTY=\n"  # base64 with the trailing newline Fluentd sends
    c.send(pack(["frames.chunk", 1_700_000_000, rec(0), {"chunk": chunk}]))
    want = b"\x81\xa3ack" + pack(chunk)
    assert c.raw_reply(len(want)) == want
    # A chunk sent as bin comes back as the same bin.
    c.send(pack(["frames.chunk", 1_700_000_000, rec(1), {"chunk": b"\x00\x01\xff"}]))
    want = b"\x81\xa3ack" + pack(b"\x00\x01\xff")
    assert c.raw_reply(len(want)) == want
    c.close()


def test_pipelined_requests_split_across_writes(nagare):
    c = Conn(nagare.forward)
    frames = b"".join(
        pack(["frames.pipe", entries([(1_700_000_000 + i, rec(i))]), {"chunk": f"p{i}"}])
        for i in range(50)
    )
    # Dribble the bytes in uneven pieces so values are cut everywhere.
    for at in range(0, len(frames), 7):
        c.send(frames[at:at + 7])
    for i in range(50):
        assert c.reply() == {"ack": f"p{i}"}
    c.close()
    assert len(kafka_read(nagare, "frames.pipe", 50)) == 50


def test_heartbeats_nil_over_tcp_and_udp(nagare):
    c = Conn(nagare.forward)
    c.send(b"\xc0\xc0")
    c.send(pack(["frames.hb", 1_700_000_000, rec(0), {"chunk": "after-nil"}]))
    assert c.reply() == {"ack": "after-nil"}
    c.close()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(5)
    u.sendto(b"\x00", nagare.forward)
    data, _ = u.recvfrom(16)
    assert data == b"\x00"
    u.close()


def test_garbage_closes_only_that_connection(nagare):
    good = Conn(nagare.forward)
    for junk in [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\xc1", pack({"not": "an array"}),
                 pack(["tag", 1, "not a map"]), pack(["tag"]), pack(["t", True, {}])]:
        bad = Conn(nagare.forward)
        bad.send(junk)
        assert bad.closed_by_server(), junk
        bad.close()
    good.send(pack(["frames.ok", 1_700_000_000, rec(0), {"chunk": "still"}]))
    assert good.reply() == {"ack": "still"}
    good.close()
    assert "wrong shape" in wait_log(nagare, "wrong shape")


def test_decompression_bomb_and_oversized_chunk_are_refused(nagare_factory):
    nagare = nagare_factory(env={"NAGARE_FORWARD_MAX_DECOMPRESSED_BYTES": str(1 << 20),
                                 "NAGARE_FORWARD_MAX_CHUNK_BYTES": str(4 << 20)})
    bomb = gzipped(b"\x00" * (64 << 20))  # 64 KiB that inflates to 64 MiB
    assert len(bomb) < 128 << 10
    c = Conn(nagare.forward)
    c.send(pack(["frames.bomb", bomb, {"chunk": "boom", "compressed": "gzip"}]))
    assert c.closed_by_server()
    c.close()
    # A bin32 head announcing 1 GiB: refused from the head, nothing buffered.
    c = Conn(nagare.forward)
    c.send(b"\x93" + pack("frames.big") + b"\xc6" + (1 << 30).to_bytes(4, "big") + b"\x00" * 1024)
    assert c.closed_by_server()
    c.close()
    log = wait_log(nagare, "max_decompressed_bytes", "max_chunk_bytes")
    assert "max_decompressed_bytes" in log and "max_chunk_bytes" in log
    # Neither was acknowledged nor stored; the server goes on.
    c = Conn(nagare.forward)
    c.send(pack(["frames.after", 1_700_000_000, rec(0), {"chunk": "ok"}]))
    assert c.reply() == {"ack": "ok"}
    c.close()
    with __import__("urllib.request").request.urlopen(f"http://{nagare.http}/topics", timeout=5) as r:
        names = [t["name"] for t in json.load(r)]
    assert "frames.bomb" not in names and "frames.big" not in names


def test_routes_from_config_file(nagare_factory, tmp_path):
    args = write_config(tmp_path, """
[[forward.route]]
match = "app.{web,api}.**"
topic = "app-logs"

[[forward.route]]
match = "raw.*"
topic = "raw-msgpack"
format = "msgpack"

[[forward.route]]
match = "debug.** noise"
drop = true
""")
    nagare = nagare_factory(extra_args=args)
    c = Conn(nagare.forward)
    sends = [("app.web", "a"), ("app.api.v2.x", "b"), ("raw.x", "c"), ("debug.deep.tag", "d"),
             ("noise", "e"), ("other tag/with:junk", "f")]
    for i, (tag, chunk) in enumerate(sends):
        c.send(pack([tag, 1_700_000_000 + i, rec(i), {"chunk": chunk}]))
        assert c.reply() == {"ack": chunk}
    c.close()
    app = kafka_read(nagare, "app-logs", 2)
    assert [h["fluent.tag"] for _, _, h in app] == [b"app.web", b"app.api.v2.x"]
    (_, raw, h), = kafka_read(nagare, "raw-msgpack", 1)
    assert msgpack.unpackb(raw) == rec(2)
    (_, other, h), = kafka_read(nagare, "other_tag_with_junk", 1)
    assert json.loads(other) == rec(5)
    with __import__("urllib.request").request.urlopen(f"http://{nagare.http}/topics", timeout=5) as r:
        names = [t["name"] for t in json.load(r)]
    assert not any(n.startswith("debug") or n == "noise" for n in names)


def test_connection_closed_mid_request_stores_nothing(nagare):
    frame = pack(["frames.torn", entries([(1_700_000_000, rec(0))] * 10), {"chunk": "t"}])
    c = Conn(nagare.forward)
    c.send(frame[:-5])
    time.sleep(0.2)
    c.close()
    c = Conn(nagare.forward)
    c.send(pack(["frames.torn", 1_700_000_000, rec(99), {"chunk": "whole"}]))
    assert c.reply() == {"ack": "whole"}
    c.close()
    (_, v, _), = kafka_read(nagare, "frames.torn", 1)
    assert json.loads(v)["seq"] == 99


def test_bad_route_pattern_stops_the_server_with_a_reason(nagare_factory, tmp_path):
    args = write_config(tmp_path, """
[[forward.route]]
match = "app.{web"
topic = "x"
""")
    try:
        nagare = nagare_factory(extra_args=args)
    except RuntimeError as e:  # exited before every listener was up
        assert "unbalanced braces" in str(e)
        return
    deadline = time.time() + 10
    while nagare.alive() and time.time() < deadline:
        time.sleep(0.05)
    assert not nagare.alive()
    # The whole log: a backtrace may follow the reason.
    assert "unbalanced braces" in nagare.log_path.read_text(errors="replace")
    nagare.proc = None
    nagare.log.close()


def test_metrics_count_requests_events_and_refused_connections(nagare):
    c = Conn(nagare.forward)
    c.send(pack(["frames.metrics", entries([(1_700_000_000, rec(i)) for i in range(7)]), {"chunk": "m"}]))
    assert c.reply() == {"ack": "m"}
    c.close()
    bad = Conn(nagare.forward)
    bad.send(b"\xc1")
    assert bad.closed_by_server()
    bad.close()
    deadline = time.time() + 5
    while True:
        with __import__("urllib.request").request.urlopen(f"http://{nagare.http}/metrics", timeout=5) as r:
            text = r.read().decode()
        if 'nagare_forward_connection_errors_total{reason="malformed"} 1' in text or time.time() > deadline:
            break
        time.sleep(0.05)
    assert 'nagare_forward_requests_total{mode="packed_forward"} 1' in text
    assert "nagare_forward_events_total 7" in text
    assert 'nagare_forward_connection_errors_total{reason="malformed"} 1' in text
