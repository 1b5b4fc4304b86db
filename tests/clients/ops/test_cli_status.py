"""`nagare status` (one screen and JSON), `nagare --version` with the git commit,
`--output json` on the other listings, and `nagare consume -n 5` stopping at the end of a
partition that holds fewer records."""

import json
import re
import subprocess
import time
import uuid

from conftest import BIN
from cli_util import cli, cli_json


def test_status_screen_and_json(nagare):
    topic = f"st-{uuid.uuid4().hex[:8]}"
    subprocess.run([BIN, "produce", "--bootstrap", nagare.kafka, "-t", topic],
                   input="a\nb\nc\n", text=True, check=True, capture_output=True, timeout=30)
    s = cli_json(nagare, "status", "--interval-ms", "200")
    assert s["version"] and re.fullmatch(r"[0-9a-f]{7,}|unknown", s["commit"])
    assert s["uptime_seconds"] >= 0 and s["started_at_ms"] > 1_600_000_000_000
    by_name = {l["name"]: l for l in s["listeners"]}
    assert by_name["kafka"] == {"name": "kafka", "protocol": "kafka",
                                "address": nagare.kafka, "tls": False}
    assert by_name["http"]["address"] == nagare.http
    assert s["topics"] >= 1 and s["partitions"] >= 1
    assert s["groups"] == 0 and s["queues"] == 0
    assert set(s["connections"]) == {"kafka", "stomp", "forward", "http"}
    assert s["disk"]["total_bytes"] > 0 and s["disk"]["log_bytes"] > 0
    assert set(s["traffic"]) == {"bytes_in", "bytes_out", "records_in", "records_out"}
    assert s["traffic"]["records_in"] >= 3 and s["traffic"]["bytes_in"] > 0
    assert s["connections"]["http"] >= 1  # the CLI's own
    assert set(s["rates"]) == {"bytes_in", "bytes_out", "records_in", "records_out"}

    screen = cli(nagare, "status").stdout
    for word in ["nagare", "uptime", "listeners", nagare.kafka, "topics", "groups",
                 "queues", "connections", "records/s"]:
        assert word in screen, (word, screen)


def test_version_names_the_commit():
    out = subprocess.run([BIN, "--version"], capture_output=True, text=True, check=True).stdout
    assert re.fullmatch(r"nagare \d+\.\d+\.\d+ \(commit [0-9a-f]{7,}\)\n", out), out


def test_listings_speak_json(nagare):
    topic = f"lj-{uuid.uuid4().hex[:8]}"
    cli(nagare, "topic", "create", topic, "-p", "2")
    topics = cli_json(nagare, "topic", "list")
    assert [len(t["partitions"]) for t in topics if t["name"] == topic] == [2]
    assert cli_json(nagare, "topic", "describe", topic)["name"] == topic
    assert isinstance(cli_json(nagare, "acl", "list"), list)
    assert isinstance(cli_json(nagare, "user", "list"), list)
    assert topic in cli(nagare, "topic", "list").stdout


def test_consume_count_stops_at_the_end(nagare):
    topic = f"c-{uuid.uuid4().hex[:8]}"
    subprocess.run([BIN, "produce", "--bootstrap", nagare.kafka, "-t", topic],
                   input="one\ntwo\nthree\n", text=True, check=True, capture_output=True,
                   timeout=30)
    start = time.time()
    p = subprocess.run([BIN, "consume", "--bootstrap", nagare.kafka, "-t", topic, "-n", "5"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["one", "two", "three"]
    assert time.time() - start < 5
    # --follow waits for more: it gets the records produced while it runs.
    f = subprocess.Popen([BIN, "consume", "--bootstrap", nagare.kafka, "-t", topic, "-n", "4",
                          "--follow"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    subprocess.run([BIN, "produce", "--bootstrap", nagare.kafka, "-t", topic],
                   input="four\n", text=True, check=True, capture_output=True, timeout=30)
    out, _ = f.communicate(timeout=10)
    assert out.splitlines() == ["one", "two", "three", "four"]
