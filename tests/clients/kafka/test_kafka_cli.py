"""`nagare produce` / `nagare consume`: the binary's own small Kafka client."""

import subprocess

from conftest import BIN


def test_nagare_produce_then_consume(nagare):
    lines = [f"line {i}" for i in range(2500)]
    subprocess.run([BIN, "produce", "--bootstrap", nagare.kafka, "-t", "cli"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=20, capture_output=True)
    out = subprocess.run([BIN, "consume", "--bootstrap", nagare.kafka, "-t", "cli"],
                         text=True, check=True, timeout=20, capture_output=True).stdout
    assert out.splitlines() == lines
    out = subprocess.run([BIN, "consume", "--bootstrap", nagare.kafka, "-t", "cli", "-o", "2490", "-n", "5"],
                         text=True, check=True, timeout=20, capture_output=True).stdout
    assert out.splitlines() == lines[2490:2495]
