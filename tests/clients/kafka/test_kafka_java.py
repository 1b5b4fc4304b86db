"""The Apache Kafka Java client (kafka-clients 4.3.1, default config: idempotent, acks=all):
produce, then consume with assign. Built by setup.sh; here it is only run."""

import pathlib
import subprocess

JAVA_DIR = pathlib.Path(__file__).resolve().parent / "java" / "target"
CLASSPATH = f"{JAVA_DIR / 'classes'}:{JAVA_DIR / 'lib'}/*"


def java(*args, timeout=60):
    assert (JAVA_DIR / "lib").is_dir(), "run tests/clients/kafka/setup.sh first"
    r = subprocess.run(
        ["java", "-cp", CLASSPATH, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "nagare.KafkaClientTest", *args],
        capture_output=True, timeout=timeout, text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_java_client_produce_and_consume(nagare):
    assert "OK produced 500" in java("produce", nagare.kafka, "java-t", "500")
    assert "OK consumed 500" in java("consume", nagare.kafka, "java-t", "500")


def test_java_client_survives_restart(nagare):
    assert "OK produced 300" in java("produce", nagare.kafka, "java-r", "300")
    nagare.restart()
    assert "OK consumed 300" in java("consume", nagare.kafka, "java-r", "300")
