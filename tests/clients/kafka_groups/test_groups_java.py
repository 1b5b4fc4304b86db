"""The Apache Kafka Java client (kafka-clients 4.3.1): KafkaConsumer.subscribe() and
commitSync(), dynamic and static (group.instance.id) membership. Built by setup.sh."""

import os
import pathlib
import subprocess
import time
import uuid

from groups_util import create_topic, produce

HERE = pathlib.Path(__file__).resolve().parent
CLASSPATH = f"{HERE / 'java' / 'classes'}:{HERE.parent / 'kafka' / 'java' / 'target' / 'lib'}/*"


def java_consume(bootstrap, topic, group, n, instance=None, timeout=60):
    assert (HERE / "java" / "classes").is_dir(), "run tests/clients/kafka_groups/setup.sh first"
    args = ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "nagare.GroupConsumer", bootstrap, topic, group, str(n)]
    if instance:
        args.append(instance)
    r = subprocess.run(args, capture_output=True, timeout=timeout, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"OK consumed {n}" in r.stdout, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("values "))
    return sorted(int(v) for v in line[len("values "):].split(",") if v)


def test_java_subscribe_commit_sync_and_resume(nagare):
    topic, group = "java-grp", "jg-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 3)
    produce(nagare.kafka, topic, 300, partitions=3)
    assert java_consume(nagare.kafka, topic, group, 300) == list(range(300))
    produce(nagare.kafka, topic, 30, partitions=3)
    # 30 new records, numbered 0..29 again: only they are read after the commit.
    assert java_consume(nagare.kafka, topic, group, 30) == list(range(30))


def test_java_static_member_rejoins_with_its_instance_id(nagare):
    topic, group = "java-static", "js-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 2)
    produce(nagare.kafka, topic, 100, partitions=2)
    assert java_consume(nagare.kafka, topic, group, 100, instance="js-1") == list(range(100))
    produce(nagare.kafka, topic, 20, partitions=2)
    # A static member's close() sends no LeaveGroup: the rejoin replaces it by instance id.
    assert java_consume(nagare.kafka, topic, group, 20, instance="js-1") == list(range(20))


def test_two_java_consumers_share_a_topic(nagare):
    """Both members join an empty topic first (so neither can drain it alone), then the
    records arrive: each reads its half, nothing is lost."""
    from confluent_kafka.admin import AdminClient

    topic, group = "java-pair", "jp-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 4)
    args = ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "nagare.GroupConsumer", nagare.kafka, topic, group, "400"]
    env = dict(os.environ, IDLE_EXIT_MS="3000")
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    try:
        admin = AdminClient({"bootstrap.servers": nagare.kafka})
        deadline = time.time() + 30
        while True:
            d = admin.describe_consumer_groups([group])[group].result(timeout=10)
            if str(d.state).endswith("STABLE") and len(d.members) == 2:
                break
            assert time.time() < deadline, f"group never had both members: {d.state} {len(d.members)}"
            time.sleep(0.2)
        produce(nagare.kafka, topic, 400, partitions=4)
        outs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    values = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
        line = next(ln for ln in out.splitlines() if ln.startswith("values "))
        got = [int(v) for v in line[len("values "):].split(",") if v]
        assert 0 < len(got) < 400, "each member reads its share:\n" + out
        values += got
    assert sorted(set(values)) == list(range(400)), "nothing lost"
