"""Helpers of the ecosystem tests: the broker they run against, a Java app driven by
commands on stdin, and a read_committed reader that keeps everything it has seen.

NAGARE_ECO_BOOTSTRAP=host:port runs the tests against another broker (they were written
against Apache Kafka 4.3.1 first, to know the harness itself is right); by default each
test gets the `nagare` fixture's broker. NAGARE_ECO_JVM_ARGS adds JVM flags (e.g.
-Dlog4j.configuration=file:/path/to/log4j.properties for INFO logs of the Java apps).
"""

import os
import pathlib
import queue
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

JAVA_DIR = pathlib.Path(__file__).resolve().parent / "java" / "target"
CLASSPATH = f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*"


def bootstrap_of(request):
    """The broker under test: $NAGARE_ECO_BOOTSTRAP, else a fresh nagare."""
    ext = os.environ.get("NAGARE_ECO_BOOTSTRAP")
    if ext:
        return ext, None
    n = request.getfixturevalue("nagare")
    return n.kafka, n


def broker_log(nagare):
    return nagare.read_log() if nagare is not None else "(external broker)"


class JavaApp:
    """A JVM running one of tests/clients/ecosystem/java's command loops.

    Its stdout lines are queued for `expect`; stderr (log4j warnings) goes to a file that
    failures print."""

    def __init__(self, main, args, log_path, jvm_args=()):
        assert (JAVA_DIR / "lib").is_dir(), "run tests/clients/ecosystem/setup.sh first"
        self.log_path = pathlib.Path(log_path)
        self.err = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             *jvm_args, *os.environ.get("NAGARE_ECO_JVM_ARGS", "").split(), "-cp", CLASSPATH, main, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1,
        )
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix, timeout=60):
        """Waits for a stdout line starting with `prefix`; fails on FAILED/ERROR/UNCAUGHT."""
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"no {prefix!r} from the Java app in {timeout} s; saw {self.seen}\n{self.log()}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"Java app exited ({self.proc.wait()}) before {prefix!r}; saw {self.seen}\n{self.log()}")
            self.seen.append(line)
            if line.startswith(prefix):
                return line
            if line.startswith(("FAILED", "ERROR", "UNCAUGHT")):
                raise AssertionError(f"Java app: {line}; saw {self.seen}\n{self.log()}")

    def cmd(self, cmd, expect, timeout=60):
        self.send(cmd)
        return self.expect(expect, timeout)

    def wait_exit(self, timeout=60):
        return self.proc.wait(timeout=timeout)

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def close(self, timeout=40):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def create_topics(bootstrap, topics, timeout=30):
    """Creates (name, partitions, config) topics and waits for them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(n, p, 1, config=c or {}) for n, p, c in topics])
    for f in fs.values():
        f.result(timeout=timeout)
    return admin


def topic_config(admin, topic, key, timeout=30):
    from confluent_kafka.admin import ConfigResource
    res = ConfigResource("topic", topic)
    cfg = admin.describe_configs([res])[res].result(timeout=timeout)
    return cfg[key].value if key in cfg else None


class CommittedReader:
    """Reads every partition of a topic from the start with isolation.level=read_committed
    and keeps all (partition, offset, key, value) it saw, so a test can count duplicates."""

    def __init__(self, bootstrap, topic, partitions):
        self.c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": "eco-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        })
        self.c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.records = []

    def poll_for(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            for m in self.c.consume(500, timeout=min(0.5, max(0.05, end - time.time()))):
                if m.error():
                    continue
                self.records.append((m.partition(), m.offset(), m.key(), m.value()))

    def wait_count(self, n, timeout):
        deadline = time.time() + timeout
        while len(self.records) < n and time.time() < deadline:
            self.poll_for(0.5)
        return len(self.records)

    def close(self):
        self.c.close()
