"""Kafka compression: 1 KiB log lines produced with lz4 or zstd by the producer, and into
topics whose `compression.type` (lz4, zstd) makes the broker compress, against Apache Kafka
and nagare, with the broker's CPU time per record."""

import random

from .common import OUT, log, run
from .kafka import against_kafka, kafka_tool, measured_pp
from .model import Row, Section, alternate, fill

# Words of an access log: text compresses about as real log lines do, unlike
# ProducerPerformance's random letters.
WORDS = ("GET POST PUT /api/v1/items /api/v1/orders /health user session request upstream served "
         "status 200 404 503 ok miss hit took ms retry id path cache region eu-west-1 us-east-1").split()


def write_payload_file(path, lines=2000, size=1024):
    """Deterministic log lines of about `size` bytes, one per record (ProducerPerformance
    picks a random line for each record)."""
    rnd = random.Random(14)
    out = []
    for _ in range(lines):
        words = []
        while sum(len(w) + 1 for w in words) < size:
            w = rnd.choice(WORDS)
            words.append(w + str(rnd.randrange(100_000)) if rnd.random() < 0.2 else w)
        out.append(" ".join(words)[:size])
    path.write_text("\n".join(out) + "\n")


def run_section(ctx) -> Section:
    OUT.mkdir(parents=True, exist_ok=True)
    payload = OUT / "log-lines-1k.txt"
    write_payload_file(payload)
    return against_kafka(ctx, "kafka-codec", "Kafka compression", lambda *args: workloads(ctx, payload, *args))


def workloads(ctx, payload, sec, sides, addr, pid):
    warm_up(ctx, addr, payload)
    produce(ctx, sec, sides, addr, pid, payload)
    sec.notes += [
        "The records are lines of an access log, about 1 KiB each, written by the section "
        "(`target/bench/log-lines-1k.txt`) and sent with ProducerPerformance's `--payload-file`: they "
        "compress as text does, where `--record-size`'s random letters would not.",
        "\"producer lz4\" / \"producer zstd\": the producer compresses (`compression.type` on the "
        "producer), the topic keeps what it gets (`compression.type=producer`, the default). Both brokers "
        "store the batches as sent; Kafka decompresses each batch to validate its records, nagare checks "
        "the batch's CRC.",
        "\"topic lz4\" / \"topic zstd\": the producer sends uncompressed batches into a topic created with "
        "`compression.type=lz4` or `zstd`, so each broker compresses every batch before it stores it, at "
        "its default level: zstd level 3 on both, and lz4's fast compressor on both (Kafka's default lz4 "
        "level, 9, picks lz4-java's fast compressor, not its high-compression one). With zstd that "
        "compression is most of the broker's CPU on either side: in a profile of nagare (outside this "
        "table) 75 % of its samples were in libzstd, and `zstd -b3 -B16384` compresses the same lines at "
        "126–156 MB/s on this machine.",
        "Before the measured rounds each broker gets one unmeasured run of each kind, so Kafka's JIT is warm.",
    ]


# (label, producer properties, topic config); the topic is created before the run when the
# config is set, otherwise the first Produce creates it with the broker's defaults.
CASES = [
    ("producer lz4", ["compression.type=lz4"], None),
    ("producer zstd", ["compression.type=zstd"], None),
    ("topic lz4", [], "compression.type=lz4"),
    ("topic zstd", [], "compression.type=zstd"),
]


def producer_performance(addr, topic, n, payload, props):
    return kafka_tool("ProducerPerformance", "--topic", topic, "--num-records", n, "--payload-file", payload,
                      "--throughput", -1, "--command-property", f"bootstrap.servers={addr}", "acks=1", *props)


def create_topic(addr, topic, config):
    return kafka_tool("TopicCommand", "--bootstrap-server", addr, "--create", "--topic", topic,
                      "--partitions", 1, "--replication-factor", 1, "--config", config)


def warm_up(ctx, addr, payload):
    n = ctx.n(100_000, 10_000)
    log(f"warm-up: ProducerPerformance, {n:,} log lines of each kind against each broker (not measured)")
    for side in addr:
        for i, (_, props, config) in enumerate(CASES):
            topic = f"codec-warm-up-{side}-{i}"
            if config:
                run(create_topic(addr[side], topic, config), 300, what=f"create-{topic}")
            run(producer_performance(addr[side], topic, n, payload, props), 900, what=f"codec-warm-up-{side}")


def produce(ctx, sec, sides, addr, pid, payload):
    n = ctx.n(300_000, 30_000)
    for i, (label, props, config) in enumerate(CASES):
        label = f"produce 1 KiB log lines, {label}"

        def one(side, r, i=i, props=props, config=config, label=label):
            topic = f"codec-{i}-{side}-{r}"
            create = create_topic(addr[side], topic, config) if config else None
            cmd = producer_performance(addr[side], topic, n, payload, props)
            if r == 0:
                if create:
                    ctx.record_commands(sec, f"TopicCommand, before each run of {label}", {sides[side]: create})
                ctx.record_commands(sec, f"ProducerPerformance {label}", {sides[side]: cmd})
            if create:
                run(create, 300, what=f"create-{topic}")
            return measured_pp(pid[side], cmd, n, f"codec-{i}-{side}")

        log(f"{label}: ProducerPerformance, {n:,} records, {ctx.rounds} rounds")
        res = alternate(ctx.rounds, label, sides, one, writes=True)
        wl = f"{label}, acks=1 ({n:,} records)"
        sec.rows += [
            fill(Row("Kafka compression", wl, "ProducerPerformance", "throughput", "records/s", "higher",
                     sides["peer"]), res, "rate"),
            fill(Row("Kafka compression", wl, "ProducerPerformance", "latency p99", "ms", "lower", sides["peer"]),
                 res, "p99_ms"),
            fill(Row("Kafka compression", wl, "ProducerPerformance", "broker CPU per record", "µs", "lower",
                     sides["peer"]), res, "cpu_us"),
        ]
