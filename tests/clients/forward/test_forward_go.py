"""Go github.com/fluent/fluent-logger-golang with RequestAck (built by setup.sh)."""

import subprocess

from fwdutil import HERE, check_events, kafka_read

GO_SENDER = HERE / "go" / "forwardsender"


def run_go(nagare, tag, n, ack=True):
    host, port = nagare.forward
    args = [str(GO_SENDER), host, str(port), tag, str(n)] + (["ack"] if ack else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + nagare.read_log()


def test_go_logger_with_request_ack(nagare):
    n = 500
    run_go(nagare, "go.ack", n)
    check_events(kafka_read(nagare, "go.ack", n), "go.ack", n, prefix="go event")


def test_go_logger_without_ack(nagare):
    n = 100
    run_go(nagare, "go.noack", n, ack=False)
    check_events(kafka_read(nagare, "go.noack", n), "go.noack", n, prefix="go event")
