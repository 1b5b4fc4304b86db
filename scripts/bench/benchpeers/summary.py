"""The README's performance table: a few rows of BENCHMARKS.md, rewritten with it, so every
figure in the README comes from the same results."""

import re
from pathlib import Path

from .common import median
from .model import fmt

START = "<!-- scripts/bench-peers writes this table from docs/bench/results.json -->"
END = "<!-- end of the table written by scripts/bench-peers -->"

# (section, start of the workload, metric, client or None): one README row each, in order.
PICKS = [
    ("kafka", "produce 100 B, acks=1", "throughput", "ProducerPerformance"),
    ("kafka", "produce 100 B, acks=1", "throughput", "rdkafka_performance"),
    ("kafka", "produce 1024 B, acks=1", "throughput", "ProducerPerformance"),
    ("kafka", "produce 1024 B, acks=all", "throughput", "ProducerPerformance"),
    ("kafka", "consume 100 B", "throughput", "ConsumerPerformance"),
    ("kafka", "consume 100 B", "throughput", "rdkafka_performance"),
    ("kafka", "produce 100 B, acks=1", "broker CPU per record", "ProducerPerformance"),
    ("kafka", "end-to-end latency", "p99", None),
    ("kafka-txn", "transactional produce", "throughput", "ProducerPerformance"),
    ("kafka-txn", "transactional produce", "throughput", "Go: franz-go"),
    ("kafka-txn", "read_committed consume", "throughput", "ConsumerPerformance"),
    ("kafka-txn", "read_committed consume", "throughput", "rdkafka_performance"),
    ("rpc", "request/reply pipelined, c = 1 ", "throughput", None),
    ("rpc", "request/reply pipelined, c = 64 ", "throughput", None),
    ("rpc", "request/reply lock-step, c = 1 ", "round trip p50", None),
    ("stomp-rabbitmq", "persistent queue", "throughput", None),
    ("stomp-activemq", "persistent queue", "throughput", None),
    ("stomp-rabbitmq", "topic fan-out", "deliveries", None),
    ("stomp-activemq", "topic fan-out", "deliveries", None),
    ("forward", "PackedForward", "throughput", None),
    ("forward", "Message mode", "throughput", None),
    ("cost", "startup", "startup", None),
    ("cost", "idle RSS", "RSS", None),
]

# Which protocol a row is about, where its workload's name does not say.
PREFIX = {"kafka": "Kafka", "kafka-txn": "Kafka", "rpc": "RPC", "stomp-rabbitmq": "STOMP", "stomp-activemq": "STOMP", "forward": "forward"}


def adv(a):
    return "–" if a is None else f"{a:.2f}×" if a < 10 else f"{a:.1f}×"


def table(sections: dict) -> list:
    """The rows PICKS names that the results have, as Markdown lines."""
    out = ["| workload | client | figure | nagare | peer | nagare's advantage |", "|---|---|---|---|---|---|"]
    for key, workload, metric, client in PICKS:
        sec = sections.get(key)
        rows = [r for r in (sec.rows if sec else []) if r.workload.startswith(workload) and r.metric == metric
                and (client is None or r.client == client)]
        if not rows:
            continue
        r = rows[0]
        peer = f"{fmt(median(r.peer_vals), r.unit)} ({r.peer})" if r.peer else "–"
        name = f"{PREFIX[key]}: {r.workload}" if PREFIX.get(key) else r.workload
        out.append(f"| {name} | {r.client or '–'} | {r.metric} | {fmt(median(r.nagare_vals), r.unit)} | {peer} | "
                   f"{adv(median(r.advantages())) if r.peer else '–'} |")
    return out


def rewrite_readme(readme: Path, sections: dict) -> bool:
    """Replaces the table between the markers; False when the README has no markers."""
    text = readme.read_text()
    pattern = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(text):
        return False
    block = "\n".join([START, *table(sections), END])
    readme.write_text(pattern.sub(lambda _: block, text, count=1))
    return True
