"""What a benchmark run produces: rows of per-round figures, peer against nagare."""

import os
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from .common import BenchError, cpu_seconds, log, median


@dataclass
class Row:
    """One figure of one workload, measured in every round on both sides. `better` says
    which way is good: the advantage of nagare in a round is nagare/peer for "higher" and
    peer/nagare for "lower" (so > 1 always means nagare did better)."""
    section: str
    workload: str
    client: str
    metric: str
    unit: str
    better: str  # "higher" or "lower"
    peer: str  # the peer's display name, "" for nagare-only figures
    peer_vals: list = field(default_factory=list)
    nagare_vals: list = field(default_factory=list)
    goal: Optional[float] = None  # advantage (or, nagare-only, the value) the issue asks for
    goal_text: str = ""
    goal_abs: Optional[float] = None  # a bound on nagare's own median, in `unit`
    note: str = ""

    def advantages(self):
        out = []
        for p, n in zip(self.peer_vals, self.nagare_vals):
            if p is None or n is None or p <= 0 or n <= 0:
                out.append(None)
            else:
                out.append(n / p if self.better == "higher" else p / n)
        return out

    def goal_met(self) -> Optional[bool]:
        """Whether the medians meet the issue's goals (None: no goal, or no figures)."""
        if self.goal is None and self.goal_abs is None:
            return None
        met = True
        if self.goal is not None:
            adv = median(self.advantages())
            if adv is None:
                return None
            met = met and adv >= self.goal
        if self.goal_abs is not None:
            v = median(self.nagare_vals)
            if v is None:
                return None
            met = met and (v >= self.goal_abs if self.better == "higher" else v <= self.goal_abs)
        return met

    def to_json(self):
        return asdict(self)


@dataclass
class Section:
    """A group of workloads run against one peer, with its commands and problems."""
    key: str
    title: str
    peer: str
    rows: list = field(default_factory=list)
    commands: list = field(default_factory=list)  # (what, command line)
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    measured_at: str = ""
    load: str = ""
    command: str = ""
    # The measured binary's `nagare --version` (empty in sections measured before it was kept).
    nagare: str = ""

    def to_json(self):
        d = asdict(self)
        d["rows"] = [r.to_json() for r in self.rows]
        return d

    @staticmethod
    def from_json(d):
        s = Section(**{k: v for k, v in d.items() if k != "rows"})
        s.rows = [Row(**r) for r in d["rows"]]
        return s


def measured(pid: int, fn):
    """Runs fn() and returns (its result, CPU seconds the server process tree used meanwhile)."""
    before = cpu_seconds(pid)
    out = fn()
    return out, cpu_seconds(pid) - before


# The figures a progress line shows, when a run has them.
SHOWN = ("rate", "per_sec", "mb_per_sec", "p50_us", "p99_us", "p50_ms", "p99_ms", "cpu_us")


# Runs that failed since the last `take_failed_runs`: the report lists them under their
# section, so that a "–" in a table is explained rather than hidden.
FAILED_RUNS: list = []


def take_failed_runs() -> list:
    taken = list(FAILED_RUNS)
    FAILED_RUNS.clear()
    return taken


def drop_page_cache() -> None:
    """Writes back and drops the page cache (root only; a no-op otherwise).

    This virtual machine backs guest memory lazily: writing into a page it has never
    touched is about ten times slower than into one it has (dd into the page cache: 0.3-0.4
    GB/s against 3.7 GB/s). A run that writes gigabytes would otherwise be measured by
    how much memory earlier runs happened to free. Dropping the cache before each writing
    run hands every run the pages of the runs before it."""
    if os.geteuid() != 0:
        return
    subprocess.run(["sync"], check=False, timeout=300)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError as e:
        log(f"  could not drop the page cache: {e}")


def alternate(rounds: int, label: str, sides: dict, fn, writes: bool = False):
    """Runs fn(side, round) for both sides in every round, peer first in odd rounds and
    nagare first in even ones (so neither always runs on the warmer machine). Returns
    {side: [metrics dict per round]}; a failed run leaves None, is logged and is kept
    for the report (`take_failed_runs`). `writes`: each run writes more than it reads back,
    and starts with the page cache dropped (`drop_page_cache`)."""
    out = {side: [] for side in sides}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(list(sides)))
        for side in order:
            if writes:
                drop_page_cache()
            try:
                m = fn(side, r)
            except BenchError as e:
                log(f"  {label} round {r + 1}/{rounds} {sides[side]}: FAILED: {e}")
                # The command's exit and log, and its own last words (the error it printed).
                lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
                why = "; ".join(dict.fromkeys(lines[:1] + lines[-1:]))[:400]
                FAILED_RUNS.append(f"{label}, round {r + 1}/{rounds}, {sides[side]}: the run failed"
                                   + (f" ({why})" if why else "") + "; its figures are missing")
                m = None
            else:
                shown = [f"{k} {fmt(m[k])}" for k in SHOWN if m.get(k)]
                log(f"  {label} round {r + 1}/{rounds} {sides[side]}: {', '.join(shown)}")
            out[side].append(m)
    return out


def fill(row: Row, results: dict, key: str, peer_side: str = "peer") -> Row:
    """Puts metric `key` of every round into the row."""
    row.peer_vals = [m.get(key) if m else None for m in results.get(peer_side, [])]
    row.nagare_vals = [m.get(key) if m else None for m in results.get("nagare", [])]
    return row


def fmt(v, unit: str = "") -> str:
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if abs(v) >= 100:
        s = f"{v:,.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    elif abs(v) >= 1:
        s = f"{v:.2f}"
    else:
        s = f"{v:.3g}"
    return f"{s} {unit}".strip()
