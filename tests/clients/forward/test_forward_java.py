"""Java Fluency (org.komamitsu:fluency-fluentd): PackedForward chunks with ack."""

import subprocess

from fwdutil import HERE, check_events, kafka_read

JAVA = HERE / "java"


def test_fluency_packed_forward_with_ack(nagare):
    host, port = nagare.forward
    n = 1000
    cp = f"{JAVA / 'target' / 'classes'}:{JAVA / 'target' / 'lib'}/*"
    r = subprocess.run(
        ["java", "-cp", cp, "ForwardSender", host, str(port), "java.fluency", str(n)],
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr + nagare.read_log()
    check_events(kafka_read(nagare, "java.fluency", n), "java.fluency", n, prefix="java event")
