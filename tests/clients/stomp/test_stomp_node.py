"""stompjs (@stomp/stompjs 7.5, the STOMP client of browsers and Node) against nagare,
through a TCP adapter in place of the WebSocket: pub/sub, queue acks with NACK and
disconnect redelivery, transactions, RabbitMQ-style temp-queue RPC, binary bodies and
heart-beats."""

import pathlib
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).with_name("node") / "stompjs.mjs"


@pytest.mark.parametrize("scenario", ["pubsub", "queue", "tx", "rpc", "binary", "heartbeat"])
def test_stompjs(nagare, scenario):
    host, port = nagare.stomp
    r = subprocess.run(["node", str(SCRIPT), host, str(port), scenario],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert f"OK {scenario}" in r.stdout
