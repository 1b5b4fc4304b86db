"""Fixtures shared by the real-client tests: a real `nagare serve` on loopback ports.

Every test gets the server binary built by scripts/test (target/release/nagare, or
$NAGARE_BIN), started on port 0 with a fresh data directory; the bound ports are read
from the --ports-file the server writes once every listener is up.

scripts/test runs the tests on two pytest-xdist workers (`--dist loadgroup`): each file's
tests stay together on one worker (its module fixtures start once), and every test under a
folder that shares one expensive session server (e.g. a Kafka cluster) stays on one worker
too, so that server starts once.
"""

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("NAGARE_BIN", str(ROOT / "target" / "release" / "nagare"))


# Folders whose tests share one session-scoped server: all of them run on one worker.
SHARED_SESSION_FOLDERS = {"cluster"}


# tryfirst: xdist's worker plugin turns the markers into groups in its own
# pytest_collection_modifyitems, and it is registered after this conftest, so it would
# otherwise run first (pluggy calls later registrations first) and see no marker at all.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups tests for `--dist loadgroup`: by file, or by folder for the folders above."""
    here = pathlib.Path(__file__).resolve().parent
    for item in items:
        rel = pathlib.Path(item.path).resolve().relative_to(here)
        folder = rel.parts[0] if len(rel.parts) > 1 else ""
        group = folder if folder in SHARED_SESSION_FOLDERS else str(rel)
        item.add_marker(pytest.mark.xdist_group(group))


class Nagare:
    """A running broker: addresses of its listeners, restart and stop."""

    def __init__(self, data_dir, extra_args=(), env=None, preexec_fn=None):
        self.data_dir = pathlib.Path(data_dir)
        # Runs in the child before exec (e.g. to lower its resource limits).
        self.preexec_fn = preexec_fn
        self.extra_args = list(extra_args)
        self.env = dict(os.environ, **(env or {}))
        self.proc = None
        self.ports = {}
        self.log_path = self.data_dir.parent / "nagare.log"

    def start(self, ports=None, timeout=20):
        """Starts the server. `ports` (a previous run's) reuses the same addresses."""
        ports_file = self.data_dir.parent / "ports"
        if ports_file.exists():
            ports_file.unlink()
        p = ports or {}
        args = [
            BIN, "serve",
            "--data-dir", str(self.data_dir),
            "--kafka-listen", p.get("kafka", "127.0.0.1:0"),
            "--stomp-listen", p.get("stomp", "127.0.0.1:0"),
            "--forward-listen", p.get("forward", "127.0.0.1:0"),
            "--http-listen", p.get("http", "127.0.0.1:0"),
            "--ports-file", str(ports_file),
        ] + self.extra_args
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     preexec_fn=self.preexec_fn)
        deadline = time.time() + timeout
        while not ports_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"nagare exited with {self.proc.returncode}:\n{self.read_log()}")
            if time.time() > deadline:
                raise RuntimeError(f"nagare did not start in {timeout} s:\n{self.read_log()}")
            time.sleep(0.02)
        self.ports = dict(line.split("=", 1) for line in ports_file.read_text().split())
        return self

    def read_log(self):
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def addr(self, name):
        return self.ports[name]

    def host_port(self, name):
        host, port = self.ports[name].rsplit(":", 1)
        return host, int(port)

    @property
    def kafka(self):
        return self.ports["kafka"]

    @property
    def stomp(self):
        return self.host_port("stomp")

    @property
    def forward(self):
        return self.host_port("forward")

    @property
    def http(self):
        return self.ports["http"]

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Stops the server; returns its exit code. SIGKILL simulates a crash."""
        if self.proc is None:
            return None
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            raise RuntimeError(f"nagare did not stop within {timeout} s:\n{self.read_log()}")
        finally:
            self.log.close()
            self.proc = None
        return code

    def restart(self, sig=signal.SIGTERM, timeout=20):
        """Stops and starts again on the same ports and data directory."""
        ports = dict(self.ports)
        self.stop(sig, timeout=max(10, timeout))
        return self.start(ports, timeout=timeout)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture
def nagare_factory():
    """Starts brokers with extra flags/env; all are stopped at the end of the test."""
    made = []
    tmp = tempfile.mkdtemp(prefix="nagare-test-")

    def make(extra_args=(), env=None, preexec_fn=None, timeout=20):
        d = pathlib.Path(tmp) / f"n{len(made)}"
        d.mkdir()
        n = Nagare(d / "data", extra_args, env, preexec_fn)
        made.append(n)
        return n.start(timeout=timeout)

    yield make
    for n in made:
        if n.alive():
            n.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def nagare(nagare_factory):
    """A fresh broker with the default settings on loopback port 0."""
    return nagare_factory()
