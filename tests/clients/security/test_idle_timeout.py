"""Idle connections are closed (Kafka's `connections.max.idle.ms`, here
`[listeners] kafka_idle_ms`; STOMP's and HTTP's likewise), busy ones are not, on plain
and TLS listeners alike."""

import socket
import struct
import time


def api_versions(correlation):
    body = struct.pack(">hhih", 18, 0, correlation, 3) + b"raw"
    return struct.pack(">i", len(body)) + body


def closed_within(s, seconds):
    s.settimeout(seconds)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionError:
        return True


def test_idle_kafka_and_stomp_connections_are_closed(nagare_factory):
    n = nagare_factory(env={"NAGARE_LISTENERS_KAFKA_IDLE_MS": "800",
                            "NAGARE_LISTENERS_STOMP_IDLE_MS": "800"})
    host, port = n.kafka.rsplit(":", 1)
    quiet = socket.create_connection((host, int(port)), timeout=5)
    busy = socket.create_connection((host, int(port)), timeout=5)
    start = time.time()
    # The busy one asks something every 200 ms for 2 s and stays open.
    for i in range(10):
        busy.sendall(api_versions(i))
        size = struct.unpack(">i", busy.recv(4))[0]
        left = size
        while left:
            left -= len(busy.recv(left))
        time.sleep(0.2)
    assert closed_within(quiet, 1), "the quiet Kafka connection is still open"
    assert time.time() - start >= 0.8
    busy.sendall(api_versions(99))
    assert busy.recv(4), "the busy Kafka connection was closed"
    busy.close()
    quiet.close()
    # STOMP: a client that connected and then said nothing is closed too.
    s = socket.create_connection(n.host_port("stomp"), timeout=5)
    s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    reply = b""
    while not reply.endswith(b"\x00"):
        reply += s.recv(1)
    assert reply.startswith(b"CONNECTED")
    assert closed_within(s, 3)


def test_defaults_keep_an_idle_kafka_connection(nagare):
    host, port = nagare.kafka.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    assert not closed_within(s, 1.5)
    s.sendall(api_versions(1))
    assert s.recv(4)
