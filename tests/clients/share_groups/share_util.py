"""Helpers of the share-group tests: topics, producing, and the Java ShareWorker
(KafkaShareConsumer from kafka-clients 4.3.1, built by setup.sh)."""

import os
import pathlib
import subprocess
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = pathlib.Path(__file__).resolve().parent
CLASSPATH = f"{HERE / 'java' / 'classes'}:{HERE.parent / 'kafka' / 'java' / 'target' / 'lib'}/*"


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    for f in fs.values():
        f.result(timeout=10)


def produce(bootstrap, topic, n, partitions=1, start=0, chunk=None):
    """Produces `n` records valued start.. round-robin over the partitions; with `chunk`,
    flushed every `chunk` records so that they land in many batches."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
        if chunk and (i - start + 1) % chunk == 0:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


def worker_args(bootstrap, group, *args):
    assert (HERE / "java" / "classes").is_dir(), "run tests/clients/share_groups/setup.sh first"
    return ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "nagare.ShareWorker", bootstrap, group, *map(str, args)]


def run_worker(bootstrap, group, *args, env=None, timeout=120):
    """Runs the worker to its end; returns its stdout (asserting it succeeded)."""
    r = subprocess.run(worker_args(bootstrap, group, *args), capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def start_worker(bootstrap, group, *args, env=None):
    return subprocess.Popen(worker_args(bootstrap, group, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))


def wait_polling(proc, timeout=60):
    """Waits for a consume-mode worker's "polling" line: its JVM is up and it has been
    polling (heartbeating into the group) for a second."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ln = proc.stdout.readline()
        if not ln:
            raise AssertionError("worker ended before polling: " + proc.stderr.read())
        if ln.strip() == "polling":
            return
    raise AssertionError("worker not polling after %ss" % timeout)


def set_group_config(bootstrap, group, **configs):
    out = run_worker(bootstrap, group, "config",
                     *(f"{k.replace('_', '.')}={v}" for k, v in configs.items()))
    assert "OK config" in out, out


def line(out, prefix):
    """The comma-separated items of the line starting with `prefix `."""
    found = next(ln for ln in out.splitlines() if ln.startswith(prefix + " "))
    return [v for v in found[len(prefix) + 1:].split(",") if v]


def consumed(out):
    """(values, delivery counts) a `consume` worker printed."""
    return line(out, "values"), [int(c) for c in line(out, "counts")]


def admin(bootstrap, group, *args, expect_ok=True):
    """Runs ShareAdmin; returns its stdout (asserting success unless told otherwise)."""
    java = ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "nagare.ShareAdmin", bootstrap, group, *map(str, args)]
    r = subprocess.run(java, capture_output=True, text=True, timeout=60)
    if expect_ok:
        assert r.returncode == 0 and f"OK {args[0]}" in r.stdout, r.stdout + r.stderr
    return r.stdout
