"""Paths, logging, running commands, and reading a process's CPU time and memory."""

import os
import re
import shlex
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# The peers are always run by the project's own scripts, so a report says exactly how.
PEERS_DIR = ROOT / "scripts" / "peers"
STATE = Path(os.environ.get("PEERS_STATE", ROOT / "target" / "peers"))
OUT = ROOT / "target" / "bench"
# One directory per invocation: a later run must not overwrite the outputs behind earlier figures.
LOGS = OUT / "logs" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A run that failed: its command and the tail of its output."""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def show(cmd) -> str:
    """A command as it would be typed, with repository paths made relative."""
    text = " ".join(shlex.quote(str(c)) for c in cmd)
    return text.replace(str(ROOT) + "/", "")


_seq = 0


def run(cmd, timeout: float, env=None, what: str = "", cwd=None) -> str:
    """Runs a command to completion; returns stdout+stderr. Every output is kept under
    target/bench/logs/ so a surprising figure can be checked afterwards."""
    global _seq
    _seq += 1
    LOGS.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", what or Path(str(cmd[0])).name)[:60]
    logfile = LOGS / f"{_seq:04d}-{slug}.log"
    full_env = dict(os.environ, **(env or {}))
    try:
        p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, env=full_env, cwd=cwd or ROOT, text=True, errors="replace")
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        logfile.write_text(f"$ {show(cmd)}\n{out}\n(timed out after {timeout} s)\n")
        raise BenchError(f"{what or show(cmd)}: timed out after {timeout:.0f} s (log {logfile})")
    logfile.write_text(f"$ {show(cmd)}\n{out}\n(exit {rc})\n")
    if rc != 0:
        tail = "\n".join(out.strip().splitlines()[-6:])
        raise BenchError(f"{what or show(cmd)}: exit {rc} (log {logfile})\n{tail}")
    return out


RESULT_RE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def parse_result(text: str) -> dict:
    """The last `RESULT k=v ...` line of a nagare bench or Go client run, numbers as floats."""
    lines = [l for l in text.splitlines() if l.startswith("RESULT ")]
    if not lines:
        raise BenchError("no RESULT line in the output:\n" + "\n".join(text.splitlines()[-6:]))
    out = {}
    for k, v in RESULT_RE.findall(lines[-1]):
        if v.startswith('"'):
            out[k] = v[1:-1]
        else:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def _children() -> dict:
    kids: dict = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def process_tree(pid: int) -> list:
    """The process and all its descendants (RabbitMQ's PID is a shell wrapper around beam)."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process tree, from /proc/PID/stat (fields 14 and 15)."""
    total = 0
    for p in process_tree(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def rss_kib(pid: int) -> int:
    """Resident memory of the process tree (VmRSS)."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
