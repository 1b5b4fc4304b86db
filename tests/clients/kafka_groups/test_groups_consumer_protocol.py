"""KIP-848 consumer groups (ConsumerGroupHeartbeat/ConsumerGroupDescribe) with real
clients: the Java KafkaConsumer (kafka-clients 4.3.1, group.protocol=consumer; built by
setup.sh as nagare.ProtocolConsumer) and librdkafka (confluent-kafka,
group.protocol=consumer). Server-side assignment, the split of partitions, rebalance on
leave, resume from the committed offsets after a broker restart, the upgrade of a
classic group, regex subscriptions that follow new topics."""

import os
import pathlib
import subprocess
import threading
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from groups_util import create_topic, produce

HERE = pathlib.Path(__file__).resolve().parent
CLASSPATH = f"{HERE / 'java' / 'classes'}:{HERE.parent / 'kafka' / 'java' / 'target' / 'lib'}/*"


class JavaMember:
    """One nagare.ProtocolConsumer process; its output lines are collected as they come."""

    def __init__(self, bootstrap, topic, group, tmp, protocol="consumer", **env):
        assert (HERE / "java" / "classes" / "nagare" / "ProtocolConsumer.class").is_file(), \
            "run tests/clients/kafka_groups/setup.sh first"
        self.stop_file = pathlib.Path(tmp) / f"stop-{uuid.uuid4().hex}"
        full_env = dict(os.environ, STOP_FILE=str(self.stop_file), GROUP_PROTOCOL=protocol,
                        RUN_MS="120000", **{k: str(v) for k, v in env.items()})
        self.proc = subprocess.Popen(
            ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "nagare.ProtocolConsumer", bootstrap, topic, group],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
        self.lines = []
        self.err = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()

    def _read(self, stream, sink):
        for line in stream:
            with self.lock:
                sink.append(line.rstrip("\n"))

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def values(self):
        return [ln.split(" ")[4] for ln in self.snapshot() if ln.startswith("record ")]

    def assignment(self):
        """The size of the latest assignment and when it was reported (ms)."""
        last = [ln for ln in self.snapshot() if ln.startswith("assignment ")]
        if not last:
            return None, None
        _, size, ms = last[-1].split(" ")
        return int(size), int(ms)

    def subscribed_ms(self):
        return next(int(ln.split(" ")[1]) for ln in self.snapshot() if ln.startswith("subscribed "))

    def stop(self, timeout=30):
        self.stop_file.touch()
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        assert "closed" in self.snapshot(), self.describe()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def describe(self):
        return "\n".join(self.snapshot()[-20:] + self.err[-30:])


def wait_for(cond, what, timeout=60, members=()):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = cond()
        if r:
            return r
        time.sleep(0.05)
    shown = "\n---\n".join(m.describe() for m in members)
    raise AssertionError(f"timed out waiting for {what}\n{shown}")


def describe_group(bootstrap, group):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=10)


def test_java_two_consumers_split_then_rebalance_on_leave(nagare, tmp_path):
    topic, group = "kip848-split", "k8-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 4)
    a = JavaMember(nagare.kafka, topic, group, tmp_path)
    b = None
    try:
        wait_for(lambda: a.assignment()[0] == 4, "a to own all 4 partitions")
        b = JavaMember(nagare.kafka, topic, group, tmp_path)
        wait_for(lambda: a.assignment()[0] == 2 and b.assignment()[0] == 2,
                 "a 2 + 2 split")
        took = max(a.assignment()[1], b.assignment()[1]) - b.subscribed_ms()
        print(f"KIP-848 join rebalance: {took} ms from subscribe() to a 2+2 split")
        d = describe_group(nagare.kafka, group)
        assert len(d.members) == 2
        assert str(d.state).upper().endswith("STABLE")
        produce(nagare.kafka, topic, 400, partitions=4)
        wait_for(lambda: len(a.values()) + len(b.values()) >= 400, "400 records")
        assert a.values() and b.values(), "both members consume"
        assert sorted(int(v) for v in a.values() + b.values()) == list(range(400))

        # b leaves (epoch -1): a takes over its partitions, and only new records follow.
        t0 = time.time()
        b.stop()
        wait_for(lambda: a.assignment()[0] == 4, "a to own all 4 again")
        print(f"KIP-848 leave rebalance: {int((time.time() - t0) * 1000)} ms")
        before = len(a.values())
        produce(nagare.kafka, topic, 100, partitions=4)
        wait_for(lambda: len(a.values()) >= before + 100, "100 more records on a")
        assert sorted(int(v) for v in a.values()[before:]) == list(range(100))
    finally:
        a.kill()
        if b:
            b.kill()


def test_java_resumes_from_commit_after_broker_restart(nagare, tmp_path):
    topic, group = "kip848-restart", "k8r-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 2)
    produce(nagare.kafka, topic, 100, partitions=2)
    a = JavaMember(nagare.kafka, topic, group, tmp_path)
    try:
        wait_for(lambda: len(a.values()) >= 100, "100 records")
        # The member outlives the broker: it rejoins with epoch 0 (its member id is
        # unknown to the restarted coordinator) and goes on from the committed offsets.
        nagare.restart()
        produce(nagare.kafka, topic, 50, partitions=2)
        wait_for(lambda: len(a.values()) >= 150, "50 more records after the restart", 90, [a])
        assert sorted(int(v) for v in a.values()) == sorted(list(range(100)) + list(range(50)))
        a.stop()
        # A new consumer of the group after another restart reads nothing old.
        nagare.restart()
        produce(nagare.kafka, topic, 10, partitions=2)
        c = JavaMember(nagare.kafka, topic, group, tmp_path)
        try:
            wait_for(lambda: len(c.values()) >= 10, "10 records after the second restart", 90)
            time.sleep(1)
            assert sorted(int(v) for v in c.values()) == list(range(10))
        finally:
            c.kill()
    finally:
        a.kill()


def test_classic_group_upgrades_to_the_consumer_protocol(nagare, tmp_path):
    """A classic group commits and empties; consumer-protocol members take the group over
    from its committed offsets; once they are gone a classic member can take it back."""
    topic, group = "kip848-upgrade", "k8u-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 3)
    produce(nagare.kafka, topic, 90, partitions=3)
    classic = JavaMember(nagare.kafka, topic, group, tmp_path, protocol="classic", WANT=90)
    try:
        wait_for(lambda: len(classic.values()) >= 90, "90 records on the classic member")
        classic.stop()
    finally:
        classic.kill()
    produce(nagare.kafka, topic, 30, partitions=3)
    new = JavaMember(nagare.kafka, topic, group, tmp_path)
    try:
        wait_for(lambda: len(new.values()) >= 30, "30 records on the consumer-protocol member")
        time.sleep(1)
        assert sorted(int(v) for v in new.values()) == list(range(30))
        d = describe_group(nagare.kafka, group)
        assert str(d.type).upper().endswith("CONSUMER"), d
        admin = AdminClient({"bootstrap.servers": nagare.kafka})
        listed = admin.list_consumer_groups().result(timeout=10)
        types = {g.group_id: str(g.type).upper() for g in listed.valid}
        assert types[group].endswith("CONSUMER"), types
        new.stop()
    finally:
        new.kill()
    produce(nagare.kafka, topic, 6, partitions=3)
    back = JavaMember(nagare.kafka, topic, group, tmp_path, protocol="classic")
    try:
        wait_for(lambda: len(back.values()) >= 6, "6 records on the classic member again")
        time.sleep(1)
        assert sorted(int(v) for v in back.values()) == list(range(6))
        back.stop()
    finally:
        back.kill()


def test_java_regex_subscription_follows_new_topics_with_range_assignor(nagare, tmp_path):
    group = "k8x-" + uuid.uuid4().hex
    create_topic(nagare.kafka, "kip848re-a", 2)
    produce(nagare.kafka, "kip848re-a", 10, partitions=2)
    a = JavaMember(nagare.kafka, "re:kip848re-.*", group, tmp_path, ASSIGNOR="range")
    try:
        wait_for(lambda: len(a.values()) >= 10, "10 records of the first topic", members=[a])
        create_topic(nagare.kafka, "kip848re-b", 3)
        create_topic(nagare.kafka, "other-kip848re", 1)
        produce(nagare.kafka, "kip848re-b", 20, partitions=3)
        produce(nagare.kafka, "other-kip848re", 5)
        wait_for(lambda: len(a.values()) >= 30, "20 records of the topic created later")
        time.sleep(1)
        topics = {ln.split(" ")[1] for ln in a.snapshot() if ln.startswith("record ")}
        assert topics == {"kip848re-a", "kip848re-b"}
        d = describe_group(nagare.kafka, group)
        assert d.partition_assignor == "range", d
    finally:
        a.kill()


def test_confluent_consumers_with_the_consumer_protocol(nagare):
    topic, group = "kip848-rdkafka", "k8c-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 4)
    produce(nagare.kafka, topic, 200, partitions=4)
    conf = {"bootstrap.servers": nagare.kafka, "group.id": group,
            "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    consumers = [Consumer(conf), Consumer(conf)]
    got = []
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.time() + 60
        while time.time() < deadline and not (
                len(got) >= 200 and all(len(c.assignment()) == 2 for c in consumers)):
            for c in consumers:
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    got.append(int(m.value()))
        assert sorted(got) == list(range(200))
        assert [len(c.assignment()) for c in consumers] == [2, 2]
        d = describe_group(nagare.kafka, group)
        assert len(d.members) == 2
    finally:
        for c in consumers:
            c.close()


def test_java_member_gets_partitions_added_while_it_runs(nagare, tmp_path):
    """CreatePartitions on a subscribed topic: the next heartbeat sees the new metadata
    and the group moves to an epoch that assigns the new partitions."""
    from confluent_kafka.admin import NewPartitions

    topic, group = "kip848-grow", "k8g-" + uuid.uuid4().hex
    create_topic(nagare.kafka, topic, 2)
    a = JavaMember(nagare.kafka, topic, group, tmp_path)
    try:
        wait_for(lambda: a.assignment()[0] == 2, "2 partitions", members=[a])
        admin = AdminClient({"bootstrap.servers": nagare.kafka})
        for f in admin.create_partitions([NewPartitions(topic, 4)]).values():
            f.result(timeout=10)
        wait_for(lambda: a.assignment()[0] == 4, "4 partitions", members=[a])
        produce(nagare.kafka, topic, 40, partitions=4)
        wait_for(lambda: len(a.values()) >= 40, "40 records", members=[a])
        assert {ln.split(" ")[2] for ln in a.snapshot() if ln.startswith("record ")} == {"0", "1", "2", "3"}
    finally:
        a.kill()


def test_confluent_regex_subscription_follows_a_new_topic(nagare):
    """librdkafka sends `^...` subscriptions as SubscribedTopicRegex under the consumer
    protocol: the broker resolves them, topics created later included."""
    create_topic(nagare.kafka, "k848rd-a", 2)
    produce(nagare.kafka, "k848rd-a", 10, partitions=2)
    c = Consumer({"bootstrap.servers": nagare.kafka, "group.id": "k8rd-" + uuid.uuid4().hex,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    got = []

    def poll_until(n, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline and len(got) < n:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append((m.topic(), int(m.value())))

    try:
        c.subscribe(["^k848rd-.*"])
        poll_until(10, 30)
        create_topic(nagare.kafka, "k848rd-b", 1)
        create_topic(nagare.kafka, "x-k848rd-c", 1)
        produce(nagare.kafka, "k848rd-b", 5)
        produce(nagare.kafka, "x-k848rd-c", 5)
        poll_until(15, 40)
        time.sleep(0.5)
        poll_until(16, 1)
        assert sorted(got) == sorted([("k848rd-a", i) for i in range(10)]
                                     + [("k848rd-b", i) for i in range(5)])
    finally:
        c.close()
