"""Fluentd forward: PackedForward chunks with acks (`nagare bench forward`), the same chunks
gzip-compressed (CompressedPackedForward, Fluentd's and Fluent Bit's `compress gzip`) and
Message mode, one event per request (the Go client), against the OpenTelemetry fluentforward
receiver."""

from .common import BenchError, log, parse_result, run
from .model import Row, Section, alternate, fill, measured
from .servers import Peer


def run_section(ctx) -> Section:
    peer = Peer("fluent-forward", "OTel fluentforward receiver")
    peer.label = peer.version().replace("fluentforwardreceiver", "OTel fluentforwardreceiver")
    sec = Section("forward", "Fluentd forward", peer.label)
    try:
        peer.start()
    except BenchError as e:
        sec.problems.append(f"{peer.label} could not be started: {e}")
        return sec
    ctx.servers["fluent-forward"] = {"label": peer.label, "start_secs": peer.start_secs,
                                     "idle_rss_kib": peer.idle_rss_kib}
    sides = {"peer": peer.label, "nagare": "nagare"}
    addr = {"peer": peer.addr, "nagare": ctx.nagare.addr("forward")}
    try:
        ctx.nagare.start()
        pid = {"peer": peer.pid, "nagare": ctx.nagare.pid}
        n = ctx.n(5_000_000, 200_000)

        def packed(compress, title):
            def one(side, r):
                cmd = [ctx.nagare_bin, "bench", "forward", "--addr", addr[side], "-c", 4, "-n", n,
                       "--chunk-events", 1000, "--event-size", 100, "--in-flight", 2, "--target", side,
                       "--compress", compress]
                if r == 0:
                    ctx.record_commands(sec, title, {sides[side]: cmd})
                out, cpu = measured(pid[side], lambda: run(cmd, 900, what=f"packed-{compress}-{side}"))
                res = parse_result(out)
                res["cpu_us"] = cpu * 1e6 / res["items"]
                return res
            return one

        log(f"PackedForward with ack: {n:,} events, {ctx.rounds} rounds")
        res = alternate(ctx.rounds, "PackedForward", sides, packed("none", "PackedForward with ack"), writes=True)

        def packed_rows(wl, res, **goal):
            return [
                fill(Row("forward", wl, "nagare bench forward", "throughput", "events/s", "higher", sides["peer"],
                         **goal), res, "per_sec"),
                fill(Row("forward", wl, "nagare bench forward", "chunk ack p99", "µs", "lower", sides["peer"]),
                     res, "p99_us"),
                fill(Row("forward", wl, "nagare bench forward", "receiver CPU per event", "µs", "lower",
                         sides["peer"]), res, "cpu_us"),
            ]

        wl = f"PackedForward, 1000 events per chunk, acks ({n:,} events of ~100 B, 4 connections)"
        sec.rows += packed_rows(wl, res, goal=2.5, goal_abs=2_500_000, goal_text="≥ 2.5× and ≥ 2.5 M/s")
        log(f"CompressedPackedForward (gzip) with ack: {n:,} events, {ctx.rounds} rounds")
        res = alternate(ctx.rounds, "CompressedPackedForward", sides,
                        packed("gzip", "CompressedPackedForward (gzip) with ack"), writes=True)
        wl = f"CompressedPackedForward (gzip), 1000 events per chunk, acks ({n:,} events of ~100 B, 4 connections)"
        sec.rows += packed_rows(wl, res)
        nm = ctx.n(300_000, 30_000)

        def message(side, r):
            cmd = [ctx.go_client, "forward", "-addr", addr[side], "-c", 4, "-n", nm, "-window", 1000,
                   "-size", 100, "-target", side]
            if r == 0:
                ctx.record_commands(sec, "Message mode with ack", {sides[side]: cmd})
            out, cpu = measured(pid[side], lambda: run(cmd, 900, what=f"message-{side}"))
            res = parse_result(out)
            res["cpu_us"] = cpu * 1e6 / res["items"]
            return res

        log(f"Message mode: {nm:,} events, {ctx.rounds} rounds")
        res = alternate(ctx.rounds, "Message mode", sides, message, writes=True)
        wl = f"Message mode, one event per request, acks, 1000 in flight per connection ({nm:,} events, 4 connections)"
        sec.rows += [
            fill(Row("forward", wl, "Go client", "throughput", "events/s", "higher", sides["peer"],
                     goal_abs=1_000_000, goal_text="≥ 1 M/s"), res, "per_sec"),
            fill(Row("forward", wl, "Go client", "ack p99", "µs", "lower", sides["peer"]), res, "p99_us"),
            fill(Row("forward", wl, "Go client", "receiver CPU per event", "µs", "lower", sides["peer"]),
                 res, "cpu_us"),
        ]
    finally:
        ctx.nagare.stop()
        peer.stop()
    sec.notes += [
        "The OTel receiver only counts what it decodes (its consumer stores nothing); nagare appends every "
        "event to its log and acks a chunk once it is durable as its `flush = \"acks\"` policy says (fsync).",
        "CompressedPackedForward sends the same chunks as one gzip member each (about a fifth of their size: "
        "the bench's events are log-like lines drawn from a small vocabulary); both receivers inflate every "
        "chunk before decoding it.",
        "Message mode asks for an ack per event (the `chunk` option, as fluent-logger's "
        "`require_ack_response`); fluent-logger's plain default sends no ack and cannot tell what was stored.",
    ]
    return sec
