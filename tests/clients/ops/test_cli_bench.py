"""`nagare bench queue` and `nagare bench fanout` run briefly against a real server: every
message sent is delivered (and, for the queue, acknowledged), the summary's RESULT line
counts them, and a size too small for the bench's stamp is refused up front."""

import re
import subprocess

from conftest import BIN


def bench(*args, timeout=120):
    return subprocess.run([BIN, "bench", *args], capture_output=True, text=True, timeout=timeout)


def result(p):
    assert p.returncode == 0, f"bench failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    m = re.search(r"^RESULT .*$", p.stdout, re.M)
    assert m, p.stdout
    fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(0)))
    return fields


def test_bench_queue(nagare):
    p = bench("queue", "--addr", nagare.addr("stomp"), "--messages", "3000", "--window", "64",
              "--ack-every", "50", "--timeout-secs", "60", "--idle-secs", "10")
    r = result(p)
    assert r["items"] == "3000"
    assert r["target"] == '"nagare"'
    assert int(r["p50_us"]) > 0


def test_bench_queue_several_producers_and_consumers_individual_acks(nagare):
    p = bench("queue", "--addr", nagare.addr("stomp"), "--messages", "2000", "--producers", "2",
              "--consumers", "3", "--ack", "client-individual", "--timeout-secs", "60",
              "--idle-secs", "10")
    r = result(p)
    assert r["items"] == "2000"
    assert "p=2 c=3" in r["title"]


def test_bench_fanout(nagare):
    p = bench("fanout", "--addr", nagare.addr("stomp"), "--messages", "2000", "--subscribers", "4",
              "--receipt-every", "100", "--timeout-secs", "60", "--idle-secs", "10")
    r = result(p)
    assert r["items"] == str(2000 * 4)
    assert "published" in p.stdout


def test_bench_refuses_a_size_without_room_for_the_stamp(nagare):
    for kind in ("queue", "fanout"):
        p = bench(kind, "--addr", nagare.addr("stomp"), "--size", "8", timeout=30)
        assert p.returncode != 0
        assert "--size must be at least 32" in p.stderr


def test_bench_queue_stops_with_a_clear_error_when_the_broker_is_gone(nagare):
    addr = nagare.addr("stomp")
    nagare.stop()
    p = bench("queue", "--addr", addr, "--messages", "10", timeout=30)
    assert p.returncode != 0
    assert addr in p.stderr
