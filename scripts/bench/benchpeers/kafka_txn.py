"""Kafka transactions: transactional produce with ProducerPerformance and with a franz-go
producer, then read_committed consume with ConsumerPerformance, against Apache Kafka and
nagare, and the broker's CPU time per record."""

from .common import OUT, BenchError, log, parse_result, run
from .kafka import against_kafka, consumer_performance_figures, kafka_tool, measured_pp, rdkafka_consume_rate
from .model import Row, Section, alternate, fill, measured

# The same producer settings on both brokers and for both clients: acks=all (transactions
# imply it), 5 ms linger, 64 KiB batches, a commit every 100 ms, one partition.
TXN_MS = 100
PRODUCER_PROPS = ["acks=all", "linger.ms=5", "batch.size=65536"]


def run_section(ctx) -> Section:
    return against_kafka(ctx, "kafka-txn", "Kafka transactions", lambda *args: workloads(ctx, *args))


def workloads(ctx, sec, sides, addr, pid):
    warm_up(ctx, addr)
    produce_java(ctx, sec, sides, addr, pid)
    consume_read_committed(ctx, sec, sides, addr, pid)
    consume_read_committed_rdkafka(ctx, sec, sides, addr, pid)
    produce_go(ctx, sec, sides, addr, pid)
    consume_go(ctx, sec, sides, addr, pid)
    sec.notes += [
        "Both brokers run with their defaults. Kafka acknowledges acks=all and commits a transaction "
        "without fsync; nagare fsyncs the records before acknowledging them (`flush = \"acks\"`, group "
        "commit) and fsyncs a commit decision before it answers EndTxn.",
        f"ProducerPerformance runs `--transactional-id ... --transaction-duration-ms {TXN_MS}`: it sends "
        "until the transaction is that old, then commits (flush + EndTxn) before it sends again. Its Java "
        "client spends 7–8 s of CPU per million records on this 2-core machine, on either broker, so it "
        "is the ceiling for both once Kafka's JIT is warm; the franz-go producer (the Go client's `txn` "
        "workload, the same loop) costs about 1 s per million, and there the broker sets the pace.",
        "read_committed consume reads the topic the first produce round of the same client wrote (commit "
        "markers included) with `isolation.level=read_committed`; ConsumerPerformance's figure is "
        "`fetch.nMsg.sec` (after the group join); rdkafka_performance (`-X isolation.level=read_committed`, "
        "partition 0 from the beginning, no group) reads the same topic; the franz-go consumer's figure is "
        "records over the whole run, connection included.",
        "Before the measured rounds each broker gets one unmeasured transactional ProducerPerformance "
        "run, so Kafka's JIT is warm.",
    ]


def rows(wl, client, peer, res, latency=False):
    """A workload's rows: throughput (goal ≥ 1.5×), p99 latency if measured, broker CPU."""
    out = [fill(Row("Kafka transactions", wl, client, "throughput", "records/s", "higher", peer, goal=1.5,
                    goal_text="≥ 1.5×"), res, "rate")]
    if latency:
        out.append(fill(Row("Kafka transactions", wl, client, "latency p99", "ms", "lower", peer), res, "p99_ms"))
    out.append(fill(Row("Kafka transactions", wl, client, "broker CPU per record", "µs", "lower", peer),
                    res, "cpu_us"))
    return out


def transactional_pp(addr, topic, n):
    return kafka_tool("ProducerPerformance", "--topic", topic, "--num-records", n, "--record-size", 100,
                      "--throughput", -1, "--transactional-id", f"tx-{topic}", "--transaction-duration-ms",
                      TXN_MS, "--command-property", f"bootstrap.servers={addr}", *PRODUCER_PROPS)


def warm_up(ctx, addr):
    n = ctx.n(500_000, 20_000)
    log(f"warm-up: transactional ProducerPerformance, {n:,} records of 100 B against each broker (not measured)")
    for side in addr:
        run(transactional_pp(addr[side], f"txn-warm-up-{side}", n), 900, what=f"txn-warm-up-{side}")


def produce_java(ctx, sec, sides, addr, pid):
    n = ctx.n(1_000_000, 50_000)
    label = "transactional produce 100 B"

    def one(side, r):
        cmd = transactional_pp(addr[side], f"txn-pp-{side}-{r}", n)
        if r == 0:
            ctx.record_commands(sec, f"ProducerPerformance {label}", {sides[side]: cmd})
        return measured_pp(pid[side], cmd, n, f"txn-pp-{side}")

    log(f"{label}: ProducerPerformance, {n:,} records, {ctx.rounds} rounds")
    res = alternate(ctx.rounds, label, sides, one)
    wl = f"{label}, commit every {TXN_MS} ms ({n:,} records)"
    sec.rows += rows(wl, "ProducerPerformance", sides["peer"], res, latency=True)


def consume_read_committed(ctx, sec, sides, addr, pid):
    n = ctx.n(1_000_000, 50_000)
    OUT.mkdir(parents=True, exist_ok=True)
    rc = OUT / "read-committed.properties"
    rc.write_text("isolation.level=read_committed\n")

    def one(side, r):
        cmd = kafka_tool("ConsumerPerformance", "--bootstrap-server", addr[side], "--topic", f"txn-pp-{side}-0",
                         "--num-records", n, "--group", f"rc-{side}-{r}", "--timeout", 60000,
                         "--command-config", rc)
        if r == 0:
            ctx.record_commands(sec, "ConsumerPerformance read_committed", {sides[side]: cmd})
        out, cpu = measured(pid[side], lambda: run(cmd, 900, what=f"rc-{side}"))
        vals = consumer_performance_figures(out, n)
        return {"rate": float(vals["fetch.nMsg.sec"]), "cpu_us": cpu * 1e6 / n}

    log(f"read_committed consume: ConsumerPerformance, {n:,} records, {ctx.rounds} rounds")
    res = alternate(ctx.rounds, "read_committed consume", sides, one)
    wl = f"read_committed consume 100 B ({n:,} records)"
    sec.rows += rows(wl, "ConsumerPerformance", sides["peer"], res)


def consume_read_committed_rdkafka(ctx, sec, sides, addr, pid):
    if ctx.rdkafka_perf is None:
        sec.problems.append("rdkafka_performance could not be built: its read_committed row is missing")
        return
    n = ctx.n(1_000_000, 50_000)

    def one(side, r):
        cmd = [ctx.rdkafka_perf, "-C", "-t", f"txn-pp-{side}-0", "-p", 0, "-o", "beginning", "-c", n,
               "-b", addr[side], "-X", "isolation.level=read_committed"]
        if r == 0:
            ctx.record_commands(sec, "rdkafka_performance read_committed", {sides[side]: cmd})
        out, cpu = measured(pid[side], lambda: run(cmd, 900, what=f"rc-rdk-{side}"))
        return {"rate": rdkafka_consume_rate(out, n), "cpu_us": cpu * 1e6 / n}

    log(f"read_committed consume: rdkafka_performance, {n:,} records, {ctx.rounds} rounds")
    res = alternate(ctx.rounds, "read_committed consume (rdkafka)", sides, one)
    wl = f"read_committed consume 100 B ({n:,} records)"
    sec.rows += rows(wl, "rdkafka_performance", sides["peer"], res)


def produce_go(ctx, sec, sides, addr, pid):
    n = ctx.n(3_000_000, 100_000)
    label = "transactional produce 100 B"

    def one(side, r):
        cmd = [ctx.go_client, "txn", "-addr", addr[side], "-target", sides[side], "-topic", f"txn-go-{side}-{r}",
               "-n", n, "-size", 100,
               "-txn-duration", f"{TXN_MS}ms", "-linger", "5ms", "-batch-bytes", 65536]
        if r == 0:
            ctx.record_commands(sec, f"Go client (franz-go) {label}", {sides[side]: cmd})
        out, cpu = measured(pid[side], lambda: run(cmd, 900, what=f"txn-go-{side}"))
        res = parse_result(out)
        return {"rate": res["per_sec"], "p99_ms": res["p99_us"] / 1000, "cpu_us": cpu * 1e6 / n}

    log(f"{label}: Go client (franz-go), {n:,} records, {ctx.rounds} rounds")
    res = alternate(ctx.rounds, label + " (franz-go)", sides, one)
    wl = f"{label}, commit every {TXN_MS} ms ({n:,} records)"
    sec.rows += rows(wl, "Go: franz-go", sides["peer"], res, latency=True)


def consume_go(ctx, sec, sides, addr, pid):
    n = ctx.n(3_000_000, 100_000)

    def one(side, r):
        cmd = [ctx.go_client, "txn-consume", "-addr", addr[side], "-target", sides[side], "-topic",
               f"txn-go-{side}-0", "-n", n]
        if r == 0:
            ctx.record_commands(sec, "Go client (franz-go) read_committed consume", {sides[side]: cmd})
        out, cpu = measured(pid[side], lambda: run(cmd, 900, what=f"rc-go-{side}"))
        res = parse_result(out)
        if res["items"] < n:
            raise BenchError(f"consumed {res['items']:.0f} of {n} records")
        return {"rate": res["per_sec"], "cpu_us": cpu * 1e6 / n}

    log(f"read_committed consume: Go client (franz-go), {n:,} records, {ctx.rounds} rounds")
    res = alternate(ctx.rounds, "read_committed consume (franz-go)", sides, one)
    wl = f"read_committed consume 100 B ({n:,} records)"
    sec.rows += rows(wl, "Go: franz-go", sides["peer"], res)
