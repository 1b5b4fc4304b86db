"""DescribeProducers (61) with the Java Admin client (kafka-clients 4.3.1): the producers a
partition knows, with their last sequence and no open transaction. Built by setup.sh."""

import pathlib
import subprocess

JAVA_DIR = pathlib.Path(__file__).resolve().parent / "java" / "target"
CLASSPATH = f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*"


def java(*args, timeout=60):
    assert (JAVA_DIR / "lib").is_dir(), "run tests/clients/kafka/setup.sh first"
    r = subprocess.run(
        ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "nagare.ProducerStateTest", *args],
        capture_output=True, timeout=timeout, text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_describe_producers_lists_an_idempotent_producer(nagare):
    assert "last sequence 49" in java("describe-producers", nagare.kafka, "dp-t", "50")


def test_describe_producers_after_restart(nagare):
    java("describe-producers", nagare.kafka, "dp-r", "10")
    nagare.restart()
    # The producer's state comes back from the log's tail.
    assert "last sequence 9" in java("describe-only", nagare.kafka, "dp-r", "10")
