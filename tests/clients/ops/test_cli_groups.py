"""`nagare group list|describe|reset-offsets|delete` on a group a real confluent-kafka
consumer made: lag from its commits, a reset to earliest read back by a new consumer,
and the group deleted."""

import time
import uuid

from confluent_kafka import Consumer, Producer

from cli_util import cli, cli_json


def consumer(nagare, group):
    return Consumer({
        "bootstrap.servers": nagare.kafka,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })


def read(c, n, timeout=20):
    got = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    return got


def wait_for(pred, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def test_group_lag_reset_and_delete(nagare):
    topic, group = f"cli-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": nagare.kafka})
    for i in range(10):
        p.produce(topic, f"m{i}".encode(), partition=0)
    assert p.flush(10) == 0

    c = consumer(nagare, group)
    c.subscribe([topic])
    assert read(c, 6) == [f"m{i}" for i in range(6)]
    c.commit(asynchronous=False)

    def listed():
        gs = [g for g in cli_json(nagare, "group", "list") if g["group_id"] == group]
        return gs and gs[0]["state"] == "Stable" and gs[0]
    g = wait_for(listed)
    assert g == {"group_id": group, "protocol_type": "consumer", "state": "Stable",
                 "members": 1, "lag": 4}
    table = cli(nagare, "group", "list").stdout
    assert group in table and "Stable" in table

    d = cli_json(nagare, "group", "describe", group)
    assert d["state"] == "Stable" and d["protocol_type"] == "consumer"
    assert len(d["members"]) == 1
    assert d["members"][0]["assignment"] == [{"topic": topic, "partitions": [0]}]
    assert d["offsets"] == [{"topic": topic, "partition": 0, "committed_offset": 6,
                             "log_end_offset": 10, "lag": 4, "metadata": ""}]
    human = cli(nagare, "group", "describe", group).stdout
    assert "LAG" in human and topic in human

    # Not while the consumer is in the group, as with Kafka's tool.
    busy = cli(nagare, "group", "reset-offsets", group, "--topic", topic, "--to-earliest",
               "--execute", check=False)
    assert busy.returncode != 0 and "409" in busy.stderr
    dry = cli(nagare, "group", "reset-offsets", group, "--topic", topic, "--to-earliest",
              check=False)
    assert dry.returncode != 0 and "409" in dry.stderr
    assert cli(nagare, "group", "delete", group, check=False).returncode != 0

    c.close()
    wait_for(lambda: cli_json(nagare, "group", "describe", group)["state"] == "Empty")

    # A dry run shows the new offsets and changes nothing.
    plan = cli_json(nagare, "group", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert [(o["partition"], o["committed_offset"]) for o in plan] == [(0, 0)]
    assert cli_json(nagare, "group", "describe", group)["offsets"][0]["committed_offset"] == 6

    done = cli_json(nagare, "group", "reset-offsets", group, "--topic", f"{topic}:0",
                    "--to-earliest", "--execute")
    assert [(o["partition"], o["committed_offset"], o["lag"]) for o in done] == [(0, 0, 10)]
    assert [g["lag"] for g in cli_json(nagare, "group", "list") if g["group_id"] == group] == [10]

    again = consumer(nagare, group)
    again.subscribe([topic])
    assert read(again, 10) == [f"m{i}" for i in range(10)]
    again.close()

    out = cli(nagare, "group", "reset-offsets", group, "--topic", topic, "--to-offset", "3",
              "--execute").stdout
    assert "NEW-OFFSET" in out
    assert cli_json(nagare, "group", "describe", group)["offsets"][0]["committed_offset"] == 3

    back = cli_json(nagare, "group", "reset-offsets", group, "--topic", topic, "--shift-by", "-2",
                    "--execute")
    assert [o["committed_offset"] for o in back] == [1]

    cli(nagare, "group", "delete", group)
    assert group not in [g["group_id"] for g in cli_json(nagare, "group", "list")]
    missing = cli(nagare, "group", "describe", group, check=False)
    assert missing.returncode != 0 and "404" in missing.stderr
