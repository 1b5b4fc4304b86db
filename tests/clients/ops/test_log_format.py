"""`--log-format json` (and NAGARE_LOG_FORMAT=json): every line nagare writes to stderr is
one JSON object with a timestamp, level, target and fields, so log shippers need no
parsing rules. The default stays human-readable text."""

import json
import time
import urllib.request


def wait_for_line(n, needle, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if needle in n.read_log():
            return
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not logged:\n{n.read_log()}")


def json_lines(n):
    lines = [line for line in n.read_log().splitlines() if line.strip()]
    assert lines, "nagare logged nothing"
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\nwhole log:\n{n.read_log()}")
    return out


def test_json_log_lines_by_flag(nagare_factory):
    n = nagare_factory(extra_args=["--log-format", "json", "--log", "info"])
    # Something logged after start-up with structured fields: a TLS-less SIGHUP.
    with urllib.request.urlopen(f"http://{n.http}/healthz", timeout=5) as r:
        assert r.read() == b"ok\n"
    n.proc.send_signal(1)
    wait_for_line(n, "nothing to reload")
    assert n.stop() == 0
    events = json_lines(n)
    for e in events:
        assert {"timestamp", "level", "target", "fields"} <= e.keys(), e
        assert e["level"] in {"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}, e
        assert isinstance(e["fields"].get("message"), str), e
    messages = [e["fields"]["message"] for e in events]
    start = next(e for e in events if e["fields"]["message"] == "nagare starting")
    # Structured fields stay separate keys, not text inside the message.
    assert start["fields"]["version"], start
    assert start["level"] == "INFO" and start["target"].startswith("nagare"), start
    assert any("nothing to reload" in m for m in messages), messages


def test_json_log_lines_by_env_and_text_by_default(nagare_factory):
    n = nagare_factory(env={"NAGARE_LOG_FORMAT": "json"})
    assert n.stop() == 0
    assert any(e["fields"]["message"] == "nagare starting" for e in json_lines(n))

    text = nagare_factory()
    assert text.stop() == 0
    start = next(line for line in text.read_log().splitlines() if "nagare starting" in line)
    assert not start.startswith("{") and " INFO " in start, start
