"""The Ruby `stomp` gem (Debian ruby-stomp 1.4) against nagare, one scenario per run of
stomp_ruby.rb: pub/sub, competing consumers, acks with NACK and disconnect redelivery,
transactions, binary bodies, temp-queue RPC and heart-beats, over STOMP 1.0-1.2."""

import pathlib
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).with_name("stomp_ruby.rb")

CASES = [(v, s) for v in ["1.0", "1.1", "1.2"]
         for s in ["pubsub", "queue", "acks", "tx", "binary", "rpc"]] + [("1.2", "heartbeat")]


@pytest.mark.parametrize("version,scenario", CASES)
def test_ruby_stomp(nagare, version, scenario):
    host, port = nagare.stomp
    r = subprocess.run(["ruby", str(SCRIPT), host, str(port), version, scenario],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert f"OK {scenario}" in r.stdout
