"""The settings of one invocation, shared by every workload."""

from dataclasses import dataclass, field
from pathlib import Path

from .common import show
from .servers import Nagare


@dataclass
class Ctx:
    rounds: int
    quick: bool
    nagare: Nagare
    nagare_bin: Path
    go_client: Path
    rdkafka_perf: Path = None
    servers: dict = field(default_factory=dict)  # name -> {start_secs, idle_rss_kib, version}

    def n(self, full: int, quick: int) -> int:
        """A size: `full` for the real run, `quick` for --quick."""
        return quick if self.quick else full

    def record_commands(self, section, what: str, cmds: dict):
        """Keeps the exact command lines of the first round for BENCHMARKS.md."""
        for side, cmd in cmds.items():
            section.commands.append((f"{what} ({side})", show(cmd)))
