"""Starting and stopping the servers: the peers through scripts/peers/*.sh, nagare directly."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from .common import PEERS_DIR, ROOT, STATE, BenchError, log, rss_kib, run

# Standard ports for the peers (only while benchmarking); nagare listens elsewhere.
PORTS = {
    "kafka": 9092, "nats": 4222, "rabbitmq": 61613, "activemq": 61614, "fluent-forward": 24224,
    "nagare-kafka": 9192, "nagare-stomp": 61623, "nagare-forward": 24234, "nagare-http": 9654,
}


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Peer:
    """A peer broker run by its script in PEERS_DIR (`start` prints the PID, `stop` ends it)."""

    def __init__(self, name: str, label: str):
        self.name, self.label = name, label
        self.script = PEERS_DIR / f"{name}.sh"
        self.port = PORTS[name]
        self.pid = None
        self.start_secs = None
        self.idle_rss_kib = None

    def args(self):
        if self.name == "kafka":
            return [self.port, self.port + 1]
        if self.name == "rabbitmq":
            return [self.port, 5672]
        return [self.port]

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def version(self) -> str:
        """The upstream version (a Debian package's revision and +dfsg suffix cut off)."""
        try:
            v = run([self.script, "version"], 900, what=f"{self.name}-version").strip().splitlines()[-1]
        except BenchError as e:
            return f"unknown ({e})"
        v = v.replace("nats-server: ", "").replace("opentelemetry-collector-contrib ", "")
        v = v[1:] if re.match(r"^v\d", v) else v
        return re.split(r"[-+~]", v, maxsplit=1)[0] if re.match(r"^\d", v) else v

    def start(self):
        log(f"starting {self.label} on {self.addr}")
        t0 = time.monotonic()
        out = run([self.script, "start", *self.args()], 900, what=f"{self.name}-start")
        self.start_secs = time.monotonic() - t0
        self.pid = int(out.strip().splitlines()[-1])
        time.sleep(2)
        self.idle_rss_kib = rss_kib(self.pid)
        log(f"{self.label} ready (pid {self.pid}, {self.start_secs:.1f} s, idle RSS {self.idle_rss_kib // 1024} MiB)")

    def stop(self):
        if self.pid is not None:
            run([self.script, "stop"], 120, what=f"{self.name}-stop")
            log(f"stopped {self.label}")
            self.pid = None


class Nagare:
    """`nagare serve` from target/release with a fresh data directory on every start."""

    def __init__(self, binary: Path):
        self.binary = binary
        self.dir = STATE / "nagare"
        self.proc = None
        self.start_secs = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{PORTS['nagare-' + listener]}"

    def command(self, data: Path):
        return [self.binary, "serve", "--data-dir", data,
                "--kafka-listen", self.addr("kafka"), "--stomp-listen", self.addr("stomp"),
                "--forward-listen", self.addr("forward"), "--http-listen", self.addr("http")]

    def start(self, quiet: bool = False) -> float:
        """Starts and waits for the "ready" line; returns the seconds from exec to it. The log
        comes through a pipe read line by line (no polling), copied to server.log."""
        for l in ("kafka", "stomp", "forward", "http"):
            if port_open(PORTS["nagare-" + l]):
                raise BenchError(f"port {PORTS['nagare-' + l]} (nagare {l}) is already in use")
        data = self.dir / "data"
        shutil.rmtree(data, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        ready = threading.Event()
        t0 = time.monotonic()
        self.proc = subprocess.Popen([str(c) for c in self.command(data)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ, NAGARE_LOG="info"))
        at = {}

        def pump(pipe, logf):
            with logf:
                for line in iter(pipe.readline, b""):
                    if not ready.is_set() and b" ready" in line:
                        at["ready"] = time.monotonic()
                        ready.set()
                    logf.write(line)
                    logf.flush()

        threading.Thread(target=pump, args=(self.proc.stdout, open(self.dir / "server.log", "wb")),
                         daemon=True).start()
        deadline = t0 + 30
        while not ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BenchError(f"nagare did not log 'ready': {(self.dir / 'server.log').read_text()[-800:]}")
        self.start_secs = at["ready"] - t0
        if not quiet:
            log(f"nagare ready (pid {self.pid}, {self.start_secs * 1000:.0f} ms)")
        return self.start_secs

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
