"""Apache Kafka Connect 4.3.1, unmodified, in distributed mode against the broker.

The worker (java/src/main/java/nagare/ConnectWorker.java, i.e. what connect-distributed.sh
runs) creates its own config, offset and status topics, compacted. Connectors are created
through its REST API, exactly as an operator would:

* test_connect_file_pipeline_survives_worker_restart: FileStreamSource → topic (JSON
  converter) → FileStreamSink; the worker is stopped cleanly and started again (in the same
  JVM); it must read its connectors back from the config topic, resume the source from the
  offsets topic and the sink from its group's committed offsets: every line exactly once.
* test_connect_exactly_once_source_survives_crash: exactly.once.source.support=enabled
  (KIP-618: the source task's records and offsets go in one transaction); the worker JVM is
  halted mid-stream and a new one takes over; a read_committed reader must see every line
  exactly once.
"""

import json
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from ecoutil import CommittedReader, JavaApp, bootstrap_of, broker_log, create_topics, topic_config


@pytest.fixture
def broker(request):
    return bootstrap_of(request)


def rest(url, method="GET", body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def create_connector(base, name, config, timeout=60):
    """POST /connectors, retrying while the worker is still joining its group (409/5xx)."""
    deadline = time.time() + timeout
    while True:
        try:
            return rest(base + "connectors", "POST", {"name": name, "config": config})
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            if e.code not in (409, 500, 503) or time.time() > deadline:
                raise AssertionError(f"creating {name}: HTTP {e.code} {body}") from e
        except urllib.error.URLError:
            if time.time() > deadline:
                raise
        time.sleep(0.5)


def wait_running(base, names, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = {n: rest(f"{base}connectors/{n}/status") for n in names}
            if all(s["connector"]["state"] == "RUNNING" and s["tasks"]
                   and all(t["state"] == "RUNNING" for t in s["tasks"]) for s in last.values()):
                return last
        except (urllib.error.URLError, OSError, KeyError) as e:
            last = repr(e)
        time.sleep(0.3)
    raise AssertionError(f"connectors not RUNNING in {timeout} s: {last}")


def wait_lines(path, n, timeout):
    deadline = time.time() + timeout
    got = []
    while time.time() < deadline:
        got = path.read_text().splitlines() if path.exists() else []
        if len(got) >= n:
            break
        time.sleep(0.2)
    return got


def url_of(line):
    return line.split(None, 1)[1].rstrip("/") + "/"


def test_connect_file_pipeline_survives_worker_restart(broker, tmp_path):
    bootstrap, nagare = broker
    run = uuid.uuid4().hex[:8]
    group, topic = f"connect-{run}", f"connect-lines-{run}"
    admin = create_topics(bootstrap, [(topic, 1, None)])
    src, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"line {i} {run}" for i in range(300)]
    src.write_text("".join(x + "\n" for x in first))

    def fail(msg):
        return f"{msg}\n--- worker log ---\n{worker.log()}\n--- broker log ---\n{broker_log(nagare)}"

    worker = JavaApp("nagare.ConnectWorker", [bootstrap, group], tmp_path / "worker.log")
    try:
        base = url_of(worker.cmd("start", "URL", timeout=90))
        create_connector(base, "file-source", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": str(src), "topic": topic, "batch.size": "50",
        })
        create_connector(base, "file-sink", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1", "file": str(sink), "topics": topic,
            "consumer.override.auto.offset.reset": "earliest",
        })
        wait_running(base, ["file-source", "file-sink"])
        got = wait_lines(sink, len(first), 60)
        assert got == first, fail(f"before the restart the sink has {len(got)} of {len(first)} lines")

        worker.cmd("stop", "STOPPED", timeout=60)
        second = [f"more {i} {run}" for i in range(200)]
        with open(src, "a") as f:
            f.write("".join(x + "\n" for x in second))

        # Same group, same topics: the connectors come back from the config topic.
        base = url_of(worker.cmd("start", "URL", timeout=90))
        wait_running(base, ["file-source", "file-sink"])
        assert sorted(rest(base + "connectors")) == ["file-sink", "file-source"]
        got = wait_lines(sink, len(first) + len(second), 60)
        time.sleep(1.5)  # a duplicate would be written within an offset flush interval
        got = sink.read_text().splitlines()
        assert got == first + second, fail(
            f"after the restart the sink has {len(got)} lines (want {len(first) + len(second)}, "
            f"{len(got) - len(set(got))} duplicates)")
        worker.cmd("stop", "STOPPED", timeout=60)
    finally:
        worker.close()

    for suffix in ("configs", "offsets", "status"):
        t = f"{group}-{suffix}"
        assert topic_config(admin, t, "cleanup.policy") == "compact", fail(f"{t} is not compacted")


class Appender:
    """Appends `lines` to a file in chunks from a thread, as a growing log file would be.

    (FileStreamSourceTask only looks at lines left in its buffer once more bytes arrive, so
    its batch.size is kept above any backlog: every poll takes all that is there.)"""

    def __init__(self, path, lines, chunk=50, every=0.1):
        self.path, self.lines, self.chunk, self.every = path, lines, chunk, every
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for i in range(0, len(self.lines), self.chunk):
            with open(self.path, "a") as f:
                f.write("".join(x + "\n" for x in self.lines[i:i + self.chunk]))
            time.sleep(self.every)

    def join(self, timeout):
        self.thread.join(timeout)
        assert not self.thread.is_alive()


def test_connect_exactly_once_source_survives_crash(broker, tmp_path):
    bootstrap, nagare = broker
    run = uuid.uuid4().hex[:8]
    group, topic = f"connect-eos-{run}", f"connect-eos-lines-{run}"
    create_topics(bootstrap, [(topic, 1, None)])
    src = tmp_path / "source.txt"
    src.write_text("")
    lines = [f"eos {i} {run}" for i in range(3000)]
    reader = CommittedReader(bootstrap, topic, 1)
    worker_args = [bootstrap, group, "exactly.once.source.support=enabled"]
    workers = []

    def fail(msg):
        logs = "\n".join(w.log() for w in workers)
        return f"{msg}\n--- worker logs ---\n{logs}\n--- broker log ---\n{broker_log(nagare)}"

    try:
        worker = JavaApp("nagare.ConnectWorker", worker_args, tmp_path / "worker-1.log")
        workers.append(worker)
        base = url_of(worker.cmd("start", "URL", timeout=90))
        create_connector(base, "eos-source", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1", "file": str(src), "topic": topic, "batch.size": "100000",
            "exactly.once.support": "required", "transaction.boundary": "poll",
        })
        wait_running(base, ["eos-source"])
        appender = Appender(src, lines)
        got = reader.wait_count(300, timeout=60)
        assert got >= 300, fail(f"only {got} committed records before the crash")
        worker.send("halt")
        assert worker.wait_exit(30) == 3

        worker = JavaApp("nagare.ConnectWorker", worker_args, tmp_path / "worker-2.log")
        workers.append(worker)
        base = url_of(worker.cmd("start", "URL", timeout=90))
        wait_running(base, ["eos-source"])
        appender.join(60)
        reader.wait_count(len(lines), timeout=60)
        reader.poll_for(1.5)
        worker.cmd("stop", "STOPPED", timeout=60)
    finally:
        for w in workers:
            w.close()
        reader.close()

    values = [json.loads(v)["payload"] for _, _, _, v in reader.records]
    dups = len(values) - len(set(values))
    assert values == lines, fail(f"read_committed saw {len(values)} records for {len(lines)} lines, {dups} duplicates")
