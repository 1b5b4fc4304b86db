"""scripts/bench-peers: argument parsing, builds, the sections in order, results and report."""

import argparse
import json
import platform
import re
import subprocess
import time
from pathlib import Path

from . import cost, disk, forward, kafka, kafka_codec, kafka_txn, mq, report, summary
from .common import OUT, PEERS_DIR, ROOT, BenchError, log, loadavg, median, run
from .ctx import Ctx
from .model import Section, take_failed_runs
from .servers import PORTS, Nagare

WORKLOADS = {
    "kafka": kafka.run_section,
    "kafka-txn": kafka_txn.run_section,
    "kafka-codec": kafka_codec.run_section,
    "rpc": mq.run_rpc,
    "stomp-rabbitmq": lambda ctx: mq.run_stomp(ctx, "rabbitmq"),
    "stomp-activemq": lambda ctx: mq.run_stomp(ctx, "activemq"),
    "forward": forward.run_section,
    "disk": disk.run_section,
    "cost": cost.run_section,
}
ALIASES = {"stomp": ["stomp-rabbitmq", "stomp-activemq"]}
# Where a run's report goes: the repository's root, or target/bench/quick/ for --quick runs,
# whose small sizes must never replace published figures.
QUICK = OUT / "quick"


def results_path(base: Path) -> Path:
    return base / "docs" / "bench" / "results.json"


EPILOG = """\
workloads (sections of BENCHMARKS.md, in the order they run):
  kafka           Apache Kafka 4.3.1: ProducerPerformance 100 B / 1 KiB acks=1 / 1 KiB acks=all,
                  rdkafka_performance produce and consume, ConsumerPerformance, EndToEndLatency;
                  throughput, latency and broker CPU per record
  kafka-txn       Apache Kafka 4.3.1: transactional produce (ProducerPerformance and a franz-go
                  producer, a commit every 100 ms) and read_committed consume (ConsumerPerformance)
  kafka-codec     Apache Kafka 4.3.1: 1 KiB log lines compressed by the producer (lz4, zstd) and by
                  the broker (topics with compression.type=lz4, zstd); throughput and broker CPU
  rpc             NATS request/reply vs STOMP temp-queue RPC, c = 1, 4, 16, 64, pipelined and
                  lock-step (Go client: nats.go / raw STOMP)
  stomp-rabbitmq  RabbitMQ 3.10 STOMP: persistent queue with receipts and client acks, topic
                  fan-out 1 -> 10, temp-queue RPC (one raw-STOMP Go client for both)
  stomp-activemq  the same against ActiveMQ 5.17
  forward         the OTel Collector's fluentforwardreceiver: PackedForward and Message mode, acks
  disk            nagare bench produce against dd on the same disk
  cost            nagare alone: strace -c -f syscalls per message, startup, idle RSS
  stomp           both stomp-* sections

Each peer is started by its script in scripts/peers/ (state under target/peers/, see
scripts/peers/README.md) and stopped when its section ends; nagare gets a fresh data directory
per section. Each comparison runs peer and nagare alternately, round after round, and reports
medians and per-round ratios. A full run takes about 50 minutes on 2 cores; run it on a quiet
machine. It needs root (apt installs the Debian peers, and Java 17 and Maven for Kafka's jars
from Maven Central), Go (the client and the forward receiver) and cargo; the only network it uses
is the package registries, every server listens on 127.0.0.1.

Outputs: BENCHMARKS.md, docs/bench/*.svg (throughput and latency charts per section, every ratio
in advantage.svg), docs/bench/results.json (every round's figures, read by --report-only) and
the performance table of README.md (between its markers);
every command's full output goes to target/bench/logs/<UTC time of the run>/. A --quick run
writes the same files under target/bench/quick/ instead and leaves the published ones alone.

examples:
  scripts/bench-peers                         everything, 3 rounds (the published figures)
  scripts/bench-peers --only rpc stomp        re-measure two workloads, keep the other sections
  scripts/bench-peers --quick --only cost     a minute-long check that the machinery works
  scripts/bench-peers --report-only           re-render BENCHMARKS.md, the charts, README's table
  scripts/bench-peers --port kafka=9292       when Kafka's usual port is taken
"""


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="scripts/bench-peers",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Runs every comparison of nagare with its peers (Apache Kafka, NATS, RabbitMQ, ActiveMQ, "
                    "the OTel forward receiver), alternating, and writes BENCHMARKS.md and docs/bench/*.svg.",
        epilog=EPILOG)
    p.add_argument("--quick", action="store_true",
                   help="small sizes and 2 rounds: checks the machinery end to end; writes under "
                        "target/bench/quick/, not the published BENCHMARKS.md")
    p.add_argument("--only", nargs="+", metavar="WORKLOAD",
                   help=f"run only these ({', '.join(list(WORKLOADS) + list(ALIASES))}); the other sections "
                        "of BENCHMARKS.md keep their earlier figures")
    p.add_argument("--rounds", type=int, help="rounds per comparison (default 3, --quick 2)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite BENCHMARKS.md, the charts and README.md's table from docs/bench/results.json "
                        "without running anything")
    p.add_argument("--port", action="append", default=[], metavar="NAME=PORT",
                   help=f"override a port ({', '.join(PORTS)})")
    p.add_argument("--nagare-bin", type=Path, default=ROOT / "target" / "release" / "nagare",
                   help="the nagare binary (default target/release/nagare, built if missing)")
    a = p.parse_args(argv)
    for kv in a.port:
        k, _, v = kv.partition("=")
        if k not in PORTS or not v.isdigit():
            p.error(f"--port {kv}: expected NAME=PORT with NAME one of {', '.join(PORTS)}")
        PORTS[k] = int(v)
    selected = []
    for w in a.only or list(WORKLOADS):
        if w in ALIASES:
            selected += ALIASES[w]
        elif w in WORKLOADS:
            selected.append(w)
        else:
            p.error(f"unknown workload {w!r}")
    a.selected = [w for w in WORKLOADS if w in selected]
    a.rounds = a.rounds or (2 if a.quick else 3)
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    return a


def build_tools(a) -> Ctx:
    if not a.nagare_bin.exists():
        log("building nagare (cargo build --release -p nagare)")
        run(["cargo", "build", "--release", "-p", "nagare"], 7200, what="cargo-build")
    go_bin = OUT / "nagare-bench-client"
    log("building the Go client (scripts/bench/go)")
    run(["go", "build", "-o", go_bin, "."], 1800, what="go-build", cwd=ROOT / "scripts" / "bench" / "go")
    ctx = Ctx(rounds=a.rounds, quick=a.quick, nagare=Nagare(a.nagare_bin), nagare_bin=a.nagare_bin, go_client=go_bin)
    if "kafka" in a.selected or "kafka-txn" in a.selected:
        log("building rdkafka_performance (scripts/bench/build-rdkafka-performance)")
        try:
            out = run([ROOT / "scripts" / "bench" / "build-rdkafka-performance"], 3600, what="rdkafka-build")
            ctx.rdkafka_perf = Path(out.strip().splitlines()[-1])
        except BenchError as e:
            log(f"rdkafka_performance unavailable: {e}")
    return ctx


def sh(cmd) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120).stdout.strip()
    except subprocess.SubprocessError:
        return ""


def machine() -> dict:
    lscpu = sh("lscpu")
    get = lambda k: (re.search(rf"^{k}:\s*(.*)$", lscpu, re.M) or [None, "?"])[1]  # noqa: E731
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
    dev, fstype = (sh(f"df --output=source,fstype {OUT.parent} | tail -1").split() + ["?", "?"])[:2]
    size = sh(f"lsblk -d -n -o SIZE {dev}") or "?"
    cpus, tpc = get(r"CPU\(s\)"), get(r"Thread\(s\) per core")
    return {
        "CPU": f"{get('Model name')}, {cpus} CPUs ({tpc} thread(s) per core), hypervisor {get('Hypervisor vendor')}",
        "memory": mem,
        "kernel": f"{platform.system()} {platform.release()}",
        "OS": sh(". /etc/os-release && echo \"$PRETTY_NAME\""),
        "disk (data directories and dd)": f"{dev}, {fstype}, {size} (virtual disk)",
    }


def nagare_version(binary: Path) -> str:
    """The binary's own `--version` ("nagare 0.1.0 (commit abc1234)"): the commit it was
    built from, which need not be the checkout's HEAD (an existing binary is not rebuilt)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "nagare (version unknown)"


def versions(nagare_bin: Path) -> dict:
    go_mod = (ROOT / "scripts" / "bench" / "go" / "go.mod").read_text()
    natsgo = (re.search(r"github.com/nats-io/nats.go (v\S+)", go_mod) or [None, "?"])[1]
    rdk = sorted((OUT / "librdkafka").glob("librdkafka-*"))
    return {
        "nagare (the newest run's binary; each section names its own where recorded)":
            f"{nagare_version(nagare_bin)}, release profile ({sh('rustc --version')})",
        "Apache Kafka (broker and Java tools)": f"{sh(f'{PEERS_DIR}/kafka.sh version')} from Maven Central, "
                                                f"{sh('java -version 2>&1 | head -1')}",
        "librdkafka (rdkafka_performance)": rdk[-1].name.replace("librdkafka-", "") + " (Debian source package)"
        if rdk else "not built",
        "NATS server": sh("nats-server --version") or "not installed",
        "RabbitMQ": (sh("dpkg-query -W -f='${Version}' rabbitmq-server") or "not installed") + ", Erlang/OTP "
                    + (sh("erl -noshell -eval 'io:format(\"~s\", [erlang:system_info(otp_release)]), halt().'") or "?"),
        "ActiveMQ": sh("dpkg-query -W -f='${Version}' activemq") or "not installed",
        "forward receiver": sh(f"{PEERS_DIR}/fluent-forward.sh version"),
        "Go client": f"{sh('go version')}, nats.go {natsgo}",
    }


def main(argv) -> int:
    a = parse_args(argv)
    base = QUICK if a.quick else ROOT
    path = results_path(base)
    if a.report_only and not path.exists():
        log(f"--report-only: there are no results to render yet ({path.relative_to(ROOT)})")
        return 2
    results = json.loads(path.read_text()) if path.exists() else {"sections": {}, "servers": {}}
    if not a.report_only:
        ctx = build_tools(a)
        log(f"workloads: {', '.join(a.selected)}; {a.rounds} rounds{' (quick sizes)' if a.quick else ''}")
        for w in a.selected:
            log(f"== {w} ==")
            started, load0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), loadavg()
            try:
                sec = WORKLOADS[w](ctx)
            except BenchError as e:
                log(f"{w} failed: {e}")
                sec = Section(w, w, "", problems=[f"the section failed: {e}"])
            finally:
                ctx.nagare.stop()
            sec.problems += take_failed_runs()
            sec.measured_at = started + (" (quick sizes)" if a.quick else "") + f", {a.rounds} rounds"
            sec.load = f"{load0} → {loadavg()}"
            sec.command = command_line(a)
            sec.nagare = nagare_version(a.nagare_bin)
            results["sections"][w] = sec.to_json()
            results.setdefault("servers", {}).update(ctx.servers)
            save(results, path, a.nagare_bin)
    write_report(results, base)
    log(f"wrote {(base / 'BENCHMARKS.md').relative_to(ROOT)} and the charts and results beside it "
        f"({path.relative_to(ROOT)})")
    return 0


def command_line(a) -> str:
    return "scripts/bench-peers" + (" --quick" if a.quick else "") + "".join(f" --port {p}" for p in a.port) + (
        f" --only {' '.join(a.only)}" if a.only else "")


def save(results, path: Path, nagare_bin: Path):
    results["ports"] = dict(PORTS)
    results["machine"] = machine()
    results["versions"] = versions(nagare_bin)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


def write_report(results, base: Path):
    data = dict(results)
    data["sections"] = {k: Section.from_json(v) for k, v in results["sections"].items()}
    p = results.get("ports", PORTS)
    data["notes"] = [
        f"Peers run on loopback ports (Kafka {p['kafka']}, NATS {p['nats']}, RabbitMQ STOMP {p['rabbitmq']}, "
        f"ActiveMQ STOMP {p['activemq']}, forward {p['fluent-forward']}) while nagare runs beside them on "
        f"others (Kafka {p['nagare-kafka']}, STOMP {p['nagare-stomp']}, forward {p['nagare-forward']}, HTTP "
        f"{p['nagare-http']}), with a fresh data directory per section; the peers are run by "
        "`scripts/peers/*.sh` (state under target/peers/).", *NOTES]
    cost_rows = {r.metric: r for r in data["sections"].get("cost", Section("", "", "")).rows}
    if "startup" in cost_rows and "RSS" in cost_rows:
        # nagare's line of the servers table comes from the cost section's repeated starts.
        data["servers"] = dict(data.get("servers", {}), nagare={
            "label": "nagare", "start_secs": median(cost_rows["startup"].nagare_vals) / 1000,
            "idle_rss_kib": median(cost_rows["RSS"].nagare_vals) * 1024})
    report.write(data, base / "BENCHMARKS.md", base / "docs" / "bench")
    if base == ROOT and not summary.rewrite_readme(ROOT / "README.md", data["sections"]):
        log("README.md has no performance table markers; its figures were not updated")


NOTES = [
    "Each client process runs on the same 2 cores as the broker it measures: on this machine the Java and "
    "librdkafka clients are often the bottleneck, which is why broker CPU per record is reported beside "
    "throughput.",
    "This virtual machine backs its memory lazily: dd writes into the page cache at 3.7 GB/s where the "
    "pages were used before and at 0.3-0.4 GB/s where they never were, so a run that writes gigabytes "
    "(forward, the disk section) is as fast as the memory earlier runs freed. Every run that mostly writes "
    "(Kafka produce, forward, disk) therefore starts with the page cache written back and dropped "
    "(`sync; echo 1 > /proc/sys/vm/drop_caches`, as root), whichever system it measures.",
    "Raw per-run outputs (every command's full output, strace tables) are kept under target/bench/logs/ "
    "of the machine that ran them; docs/bench/results.json holds every round's figures.",
]
