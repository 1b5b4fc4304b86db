"""Helpers of the cluster-mode tests: the 3-broker Kafka cluster of scripts/kafka-cluster,
nagare gateways in front of it (`serve --store kafka://...`), and Kafka clients
(confluent-kafka) reading and writing the cluster directly."""

import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SCRIPT = ROOT / "scripts" / "kafka-cluster"
ACKED_SENDER = HERE / "go" / "ackedsender"
KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.3.1")
KAFKA_LIBS = pathlib.Path(os.environ.get("KAFKA_CLUSTER_CACHE", ROOT / "target" / "kafka-cluster")) / f"kafka-{KAFKA_VERSION}"
SHARE_WORKER_CLASSES = HERE / "java" / "classes"
# The cluster of a test session: nodes on BASEPORT..BASEPORT+2, controllers 100 above.
BASEPORT = int(os.environ.get("NAGARE_TEST_KAFKA_BASEPORT", "19092"))

# The suite's STOMP helpers (stomp.py with a collecting listener).
sys.path.insert(0, str(HERE.parent / "stomp"))
from stomputil import Collector, connect  # noqa: E402,F401


def _suite_conftest():
    """tests/clients/conftest.py, whose Nagare class (start on loopback port 0, ports file,
    stop, restart on the same ports) the gateways reuse. Loaded under its own name: this
    directory's conftest is `conftest` while it is being imported."""
    spec = importlib.util.spec_from_file_location("clients_conftest", HERE.parent / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_suite = _suite_conftest()
BIN = _suite.BIN
Nagare = _suite.Nagare


def uid():
    return uuid.uuid4().hex[:10]


class KafkaCluster:
    """scripts/kafka-cluster on one base port (node N = node.id N on BASEPORT+N-1)."""

    def __init__(self, base=BASEPORT, state_dir=None):
        self.base = base
        self.env = dict(os.environ)
        if state_dir is not None:
            self.env["KAFKA_CLUSTER_DIR"] = str(state_dir)

    def run(self, *args, timeout=240):
        r = subprocess.run([str(SCRIPT), *map(str, args), str(self.base)], capture_output=True,
                           text=True, timeout=timeout, env=self.env)
        if r.returncode != 0:
            raise RuntimeError(f"kafka-cluster {' '.join(map(str, args))} failed:\n{r.stdout}{r.stderr}")
        return r.stdout.strip()

    def start(self):
        return self.run("start")

    def stop(self):
        return self.run("stop", timeout=60)

    def kill(self, node):
        return self.run("kill", node, timeout=30)

    def restart(self, node):
        return self.run("restart", node, timeout=180)

    def node_states(self):
        """{node: running?} from `status` (which exits 1 unless all three run)."""
        r = subprocess.run([str(SCRIPT), "status", str(self.base)], capture_output=True, text=True,
                           timeout=30, env=self.env)
        return {int(line.split()[1]): "not running" not in line
                for line in r.stdout.splitlines() if line.startswith("node ")}

    def running(self):
        return all(self.node_states().values())

    def ensure_all_running(self):
        """Restarts any node a previous test left dead."""
        for node, up in self.node_states().items():
            if not up:
                self.restart(node)

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{self.base + i}" for i in range(3))

    @property
    def store(self):
        return "kafka://" + self.bootstrap

    def node_port(self, node):
        return self.base + node - 1

    def admin(self):
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def partition(self, topic, partition=0, timeout=10):
        """The partition's metadata (leader, replicas, isrs) as the cluster reports it."""
        md = self.admin().list_topics(topic, timeout=timeout)
        t = md.topics[topic]
        if t.error is not None:
            raise RuntimeError(f"topic {topic}: {t.error}")
        return t.partitions[partition]

    def leader(self, topic, partition=0):
        return self.partition(topic, partition).leader

    def wait_topic(self, topic, timeout=30):
        """Waits until the topic exists with a leader for partition 0; returns its metadata."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                p = self.partition(topic)
                if p.leader >= 0:
                    return p
            except Exception as e:  # noqa: BLE001 - reported below if it never appears
                last = e
            time.sleep(0.2)
        raise AssertionError(f"topic {topic} has no leader after {timeout}s ({last})")

    def wait_isr(self, topic, size=3, partition=0, timeout=90):
        deadline = time.time() + timeout
        p = None
        while time.time() < deadline:
            p = self.partition(topic, partition)
            if len(p.isrs) >= size:
                return p
            time.sleep(0.5)
        raise AssertionError(f"{topic}-{partition}: ISR {p.isrs if p else '?'} not back to {size}")

    def create_topic(self, name, partitions=1):
        admin = self.admin()  # referenced until the future resolves
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3)])[name].result(30)
        self.wait_topic(name)
        return name

    def read_topic(self, topic, timeout=60):
        """Every record of every partition, from the start up to the end offsets as of this
        call: [(partition, offset, key, value, headers dict)]."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"read-{uid()}",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            md = c.list_topics(topic, timeout=10).topics[topic]
            ends = {}
            for p in md.partitions:
                _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if hi > 0:
                    ends[p] = hi
            c.assign([TopicPartition(topic, p, 0) for p in ends])
            out, pos = [], {p: 0 for p in ends}
            deadline = time.time() + timeout
            while any(pos[p] < ends[p] for p in ends):
                assert time.time() < deadline, f"{topic}: read up to {pos} of {ends} in {timeout}s"
                m = c.poll(0.5)
                if m is None or m.error():
                    continue
                pos[m.partition()] = m.offset() + 1
                if m.offset() < ends[m.partition()]:
                    out.append((m.partition(), m.offset(), m.key(), m.value(), dict(m.headers() or [])))
            return out
        finally:
            c.close()

    def end_offsets(self, topic):
        """{partition: end offset (high watermark)} of every partition of the topic."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"wm-{uid()}"})
        try:
            md = c.list_topics(topic, timeout=10).topics[topic]
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in md.partitions}
        finally:
            c.close()


class Gateway(Nagare):
    """`nagare serve --store kafka://...` with its own data directory and loopback ports
    (no Kafka listener: in cluster mode Kafka clients use the cluster)."""

    def __init__(self, data_dir, store, node_id, config=None, extra_args=(), env=None):
        super().__init__(data_dir, extra_args, env)
        # The gateway reads NAGARE_* variables as settings: the tests' own are not for it.
        for k in ("NAGARE_BIN", "NAGARE_TEST_KAFKA_BASEPORT"):
            self.env.pop(k, None)
        self.store = store
        self.node_id = node_id
        self.config = config

    def launch(self, ports=None):
        """Starts the process without waiting (see wait_started)."""
        self.ports_file = self.data_dir.parent / "ports"
        if self.ports_file.exists():
            self.ports_file.unlink()
        p = ports or {}
        args = [
            BIN, "serve",
            "--store", self.store,
            "--node-id", str(self.node_id),
            "--data-dir", str(self.data_dir),
            "--stomp-listen", p.get("stomp", "127.0.0.1:0"),
            "--forward-listen", p.get("forward", "127.0.0.1:0"),
            "--http-listen", p.get("http", "127.0.0.1:0"),
            "--ports-file", str(self.ports_file),
        ]
        if self.config is not None:
            cfg = self.data_dir.parent / "nagare.toml"
            cfg.write_text(self.config)
            args += ["--config", str(cfg)]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args + self.extra_args, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env)
        return self

    def wait_started(self, timeout=30):
        """Until the listeners are bound (the ports file is written)."""
        deadline = time.time() + timeout
        while not self.ports_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway {self.node_id} exited with {self.proc.returncode}:\n{self.read_log()}")
            if time.time() > deadline:
                raise RuntimeError(f"gateway {self.node_id} did not bind in {timeout}s:\n{self.read_log()}")
            time.sleep(0.05)
        self.ports = dict(line.split("=", 1) for line in self.ports_file.read_text().split())
        return self

    def start(self, ports=None, timeout=30):
        return self.launch(ports).wait_started(timeout)

    def kill(self):
        """SIGKILL: a crash."""
        return self.stop(signal.SIGKILL)

    def health(self, timeout=3):
        """(HTTP status, body) of GET /healthz; (None, reason) when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{self.http}/healthz", timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError as e:
            return None, str(e)

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        status, body = None, ""
        while time.time() < deadline:
            if not self.alive():
                raise RuntimeError(f"gateway {self.node_id} exited:\n{self.read_log()}")
            status, body = self.health()
            if status == 200:
                return self
            time.sleep(0.2)
        raise AssertionError(f"gateway {self.node_id} not ready after {timeout}s: "
                             f"/healthz {status} {body!r}\n{self.read_log()}")


def stomp_connect(gateway, **kw):
    """A stomp.py 1.2 connection with a Collector listener (conn.collector)."""
    return connect(gateway, **kw)


def start_acked_sender(addrs, tag, prefix, *args):
    """The Go forward load (fluent-logger-golang with acks); stops when its stdin closes."""
    assert ACKED_SENDER.exists(), f"{ACKED_SENDER} is missing: run tests/clients/cluster/setup.sh"
    return subprocess.Popen(
        [str(ACKED_SENDER), "-addrs", ",".join(f"{h}:{p}" for h, p in addrs), "-tag", tag,
         "-prefix", prefix, "-stdin", *map(str, args)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def share_worker(bootstrap, group, *args, timeout=120, env=None):
    """Runs the share-group tests' Java worker (KafkaShareConsumer, kafka-clients of the
    cluster's version) to its end; returns its stdout."""
    assert (SHARE_WORKER_CLASSES / "nagare" / "ShareWorker.class").exists(), \
        "the Java share worker is missing: run tests/clients/cluster/setup.sh"
    cmd = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={KAFKA_LIBS / 'log4j2.properties'}",
           "-cp", f"{SHARE_WORKER_CLASSES}:{KAFKA_LIBS / 'jars'}/*", "nagare.ShareWorker",
           bootstrap, group, *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r.stdout


def worker_line(out, prefix):
    """The comma-separated items of the worker's line starting with `prefix `."""
    found = next(ln for ln in out.splitlines() if ln.startswith(prefix + " "))
    return [v for v in found[len(prefix) + 1:].split(",") if v]
