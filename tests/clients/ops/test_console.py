"""The web console in a real browser: Debian's chromium, headless, driven by selenium.

The test fills a broker with something to look at (a topic with a JSON, a msgpack and a
text record, a consumer group with a committed offset, a STOMP queue with messages, an
open STOMP connection), then walks every page of the console and checks that what the
broker knows shows up: the version, the topic's message count, the JSON record
pretty-printed, the group's lag, the queue's depth. Screenshots of every page go to
tests/clients/ops/artifacts/ (git-ignored), also when a check fails.

Also here, without a browser: the message browser endpoint's answers, and that the
console sits behind the API's authentication.
"""

import base64
import json
import pathlib
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import msgpack
import pytest
import stomp
from confluent_kafka import Consumer, Producer, TopicPartition
from fluent import sender
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import BIN, Nagare

ARTIFACTS = pathlib.Path(__file__).resolve().parent / "artifacts"
TOPIC = "console-orders"
GROUP = "console-group"
QUEUE = "console-jobs"
JSON_VALUE = {"order": 1, "items": ["apple", "pear"], "total": 3.5, "customer": {"name": "Ada"}}
MSGPACK_VALUE = {"user": "ada", "n": 3}


def http(n, method, path, body=None, auth=None):
    """(status, parsed JSON or text) of one admin API call."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{n.http}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, text, ctype = r.status, r.read().decode(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, text, ctype = e.code, e.read().decode(), e.headers.get("Content-Type", "")
    return status, (json.loads(text) if "json" in ctype and text else text)


def fill(n):
    """A topic with three records, a group with a committed offset, a queue with three
    messages, a forward event, and a STOMP connection left open (returned, for the
    connections page)."""
    status, body = http(n, "POST", "/topics", {"name": TOPIC, "partitions": 2})
    assert status == 201, body
    p = Producer({"bootstrap.servers": n.kafka, "compression.type": "lz4", "linger.ms": 5})
    p.produce(TOPIC, json.dumps(JSON_VALUE).encode(), key=b"order-1", partition=0,
              headers=[("source", b"console-test")])
    p.produce(TOPIC, msgpack.packb(MSGPACK_VALUE), key=b"user-ada", partition=0)
    p.produce(TOPIC, b"plain words", partition=0)
    assert p.flush(10) == 0
    # A committed offset without joining: the group is Empty, its lag 3 - 1 = 2.
    c = Consumer({"bootstrap.servers": n.kafka, "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    c.close()
    conn = stomp.Connection12([n.stomp], heartbeats=(0, 0))
    conn.connect(wait=True, headers={"client-id": "console-test"})
    for i in range(3):
        conn.send(f"/queue/{QUEUE}", f"job {i}", headers={"receipt": f"r{i}"})
    # One forward event no route matches: counted on the "(unmatched)" route.
    host, port = n.forward
    fluent = sender.FluentSender("console", host=host, port=port)
    assert fluent.emit("logs", {"msg": "hello"}), fluent.last_error
    fluent.close()
    return conn


def browser():
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert chromium and driver, (
        "chromium and chromium-driver are needed: apt-get install chromium chromium-driver "
        "(tests/clients/ops/setup.sh)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--lang=en-US"):
        opts.add_argument(flag)
    # Both paths given: selenium never tries to download a driver.
    return webdriver.Chrome(service=Service(driver), options=opts)


class Console:
    """The browser on one broker's console, with waits that say what they waited for."""

    def __init__(self, driver, base):
        self.d = driver
        self.base = base

    def go(self, route, page):
        self.d.get(self.base + route)
        self.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-page") == page
                   and d.find_element(By.ID, "main").get_attribute("data-state") == "ready",
                   f"page {page} ready")

    def until(self, check, what, timeout=10):
        def safe(d):
            try:
                return check(d)
            except Exception:  # the element is not there (yet), or was redrawn
                return False
        try:
            return WebDriverWait(self.d, timeout, poll_frequency=0.1).until(safe)
        except TimeoutException:
            errors = [e.text for e in self.d.find_elements(By.CSS_SELECTOR, ".error")]
            raise AssertionError(f"timed out waiting for {what}; errors on the page: {errors}")

    def text(self, css, expected, timeout=10):
        """Waits until the element's text is `expected` (a string) or satisfies it."""
        ok = expected if callable(expected) else (lambda t: t == expected)
        return self.until(lambda d: (lambda t: t if ok(t) else False)(d.find_element(By.CSS_SELECTOR, css).text),
                          f"{css} to show {expected!r}", timeout)

    def shot(self, name):
        """The whole page, not just the window (tables run long), through DevTools."""
        ARTIFACTS.mkdir(exist_ok=True)
        size = self.d.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 8000), "scale": 1}
        png = self.d.execute_cdp_cmd("Page.captureScreenshot",
                                     {"format": "png", "captureBeyondViewport": True, "clip": clip})
        (ARTIFACTS / f"console-{name}.png").write_bytes(base64.b64decode(png["data"]))


@pytest.mark.timeout(120)
def test_console_pages_show_the_broker(nagare):
    conn = fill(nagare)
    status, st = http(nagare, "GET", "/status")
    assert status == 200, st
    driver = browser()
    ui = Console(driver, f"http://{nagare.http}/")
    try:
        # Overview: the version, and live rates once two /status polls are in.
        ui.go("", "overview")
        ui.text("#ov-version", st["version"])
        ui.text("#ov-in", lambda t: t.endswith("msg/s"), timeout=6)
        assert st["version"] in driver.find_element(By.ID, "build").text
        ui.shot("overview")

        # Topics: the test topic with its message count (3 on partition 0, none on 1).
        ui.go("#/topics", "topics")
        ui.text(f'#topics tr[data-topic="{TOPIC}"] td.messages', "3")
        ui.shot("topics")
        driver.find_element(By.LINK_TEXT, TOPIC).click()
        ui.until(lambda d: d.find_element(By.TAG_NAME, "h1").text == TOPIC, "the topic page")
        ui.text("#partitions tbody tr:first-child td.messages", "3")
        ui.text("#topic-config", lambda t: "retention.ms" in t)
        ui.shot("topic")

        # Message browser, through its form: the JSON value pretty-printed, the msgpack
        # one decoded, the key and the header shown.
        ui.go("#/messages", "messages")
        Select(driver.find_element(By.ID, "mb-topic")).select_by_value(TOPIC)
        Select(driver.find_element(By.ID, "mb-partition")).select_by_value("0")
        Select(driver.find_element(By.ID, "mb-mode")).select_by_value("tail")
        driver.find_element(By.CSS_SELECTOR, "#browse button[type=submit]").click()
        row = '#message-table tr[data-offset="0"]'
        ui.text(f"{row} pre.value", json.dumps(JSON_VALUE, indent=2))
        assert driver.find_element(By.CSS_SELECTOR, f"{row} td.key").text == "order-1"
        assert "console-test" in driver.find_element(By.CSS_SELECTOR, f"{row} td.headers").text
        packed = driver.find_element(By.CSS_SELECTOR, '#message-table tr[data-offset="1"] pre.value')
        assert packed.get_attribute("data-kind") == "msgpack"
        assert json.loads(packed.text) == MSGPACK_VALUE
        text = driver.find_element(By.CSS_SELECTOR, '#message-table tr[data-offset="2"] pre.value')
        assert (text.get_attribute("data-kind"), text.text) == ("text", "plain words")
        ui.shot("messages")
        # From an offset: the page starts there.
        Select(driver.find_element(By.ID, "mb-mode")).select_by_value("offset")
        start = driver.find_element(By.ID, "mb-from")
        start.clear()
        start.send_keys("2")
        driver.find_element(By.CSS_SELECTOR, "#browse button[type=submit]").click()
        ui.text("#message-table tbody tr:first-child td.offset", "2")
        assert len(driver.find_elements(By.CSS_SELECTOR, "#message-table tbody tr")) == 1

        # Groups: the lag in the list and per partition on the group's page.
        ui.go("#/groups", "groups")
        ui.text(f'#groups tr[data-group="{GROUP}"] td.lag', "2")
        ui.shot("groups")
        driver.find_element(By.LINK_TEXT, GROUP).click()
        ui.text("#group-lag", "2")
        ui.text(f'#offsets tr[data-topic="{TOPIC}"][data-partition="0"] td.lag', "2")
        ui.shot("group")
        # Reset to the earliest offset (the group is empty, so the broker allows it).
        Select(driver.find_element(By.CSS_SELECTOR, "#reset-offsets select[name=to]")).select_by_value("earliest")
        driver.find_element(By.CSS_SELECTOR, "#reset-offsets button[type=submit]").click()
        ui.text("#group-lag", "3")

        # Queues: the queue's depth.
        ui.go("#/queues", "queues")
        ui.text(f'#queues tr[data-queue*="{QUEUE}"] td.depth', "3")
        ui.shot("queues")
        # Purge takes a second click to confirm.
        purge = driver.find_element(By.CSS_SELECTOR, f'#queues tr[data-queue*="{QUEUE}"] button.danger')
        purge.click()
        purge.click()
        ui.text("#main .outcome", lambda t: "purged 3" in t)
        ui.text(f'#queues tr[data-queue*="{QUEUE}"] td.depth', "0")

        # Connections: the STOMP connection left open (and this browser's own).
        ui.go("#/connections", "connections")
        ui.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#connections tr[data-protocol="stomp"]'),
                 "the open STOMP connection")
        ui.shot("connections")

        # Forward routes: the event is counted on the route of unmatched tags.
        ui.go("#/forward", "forward")
        ui.text('#routes tr[data-pattern="(unmatched)"] td.events', "1")
        ui.shot("forward")

        # A failing call shows the broker's error on the page instead of breaking it.
        ui.go("#/topics/no-such-topic", "topics")
        ui.text("#main .error", lambda t: "unknown topic" in t)
        ui.go("#/topics", "topics")
        ui.text(f'#topics tr[data-topic="{TOPIC}"] td.messages', "3")
        logs = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"
                and "no-such-topic" not in e.get("message", "")]
        assert not logs, logs
    except BaseException:
        ui.shot("failure")
        raise
    finally:
        driver.quit()
        conn.disconnect()


def test_message_browser_api(nagare):
    fill(nagare).disconnect()
    base = f"/topics/{TOPIC}/messages"
    status, page = http(nagare, "GET", base + "?tail=2")
    assert status == 200, page
    assert (page["log_start_offset"], page["log_end_offset"], page["next_offset"]) == (0, 3, 3)
    assert [m["offset"] for m in page["messages"]] == [1, 2]
    assert page["messages"][0]["value"] == {"msgpack": MSGPACK_VALUE}
    assert page["messages"][1]["value"] == {"text": "plain words"}
    status, page = http(nagare, "GET", base + "?offset=0&limit=1")
    first = page["messages"][0]
    assert first["value"] == {"json": JSON_VALUE}
    assert first["key"] == {"text": "order-1"}
    assert first["headers"] == [{"key": "source", "value": {"text": "console-test"}}]
    assert page["next_offset"] == 1
    # From a time: the first record at or after it, through the time index.
    status, page = http(nagare, "GET", f"{base}?timestamp_ms={first['timestamp_ms']}")
    assert page["messages"][0]["offset"] == 0
    status, page = http(nagare, "GET", f"{base}?timestamp_ms={int(time.time() * 1000) + 60_000}")
    assert page["messages"] == []
    # Partition 1 is empty; errors are JSON with the right status.
    assert http(nagare, "GET", base + "?partition=1")[1]["messages"] == []
    assert http(nagare, "GET", base + "?partition=7")[0] == 404
    assert http(nagare, "GET", "/topics/nope/messages")[0] == 404
    status, err = http(nagare, "GET", base + "?offset=1&tail=1")
    assert status == 400 and "at most one" in err["error"]


def test_console_is_behind_the_api_authentication(tmp_path):
    data = tmp_path / "data"
    for user, password in (("admin", "admin-secret-1"), ("alice", "alice-secret-2")):
        subprocess.run([BIN, "user", "add", user, "--password", password, "--data-dir", str(data)],
                       capture_output=True, text=True, timeout=60, check=True)
    n = Nagare(data, ["--auth", "required", "--super-users", "admin"])
    n.start()
    try:
        admin = ("admin", "admin-secret-1")
        for path in ("/", "/console/app.js", "/console/style.css"):
            assert http(n, "GET", path)[0] == 401
            assert http(n, "GET", path, auth=admin)[0] == 200
        assert http(n, "POST", "/topics", {"name": "secret"}, auth=admin)[0] == 201
        # Reading records needs Read on the topic: alice has no ACL.
        assert http(n, "GET", "/topics/secret/messages", auth=("alice", "alice-secret-2"))[0] == 403
        assert http(n, "GET", "/topics/secret/messages", auth=admin)[0] == 200
    finally:
        n.stop()
