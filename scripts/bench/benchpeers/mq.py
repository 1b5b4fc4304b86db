"""Messaging over MQ with one Go client (scripts/bench/go): request/reply against NATS,
and STOMP persistent queues, topic fan-out and temp-queue RPC against RabbitMQ and ActiveMQ."""

from .common import BenchError, log, parse_result, run
from .model import Row, Section, alternate, fill, measured
from .servers import Peer


# Requests in flight per pipelined client. Without a bound ActiveMQ's producer flow control
# stalls a connection that both sends requests and receives replies (a run hung for good in
# about one of three tries); 1000 changes nothing measurable for NATS and nagare.
RPC_WINDOW = 1000


def go_result(ctx, cmd, pid, what, per):
    """Runs the Go client; returns its RESULT figures plus the server's CPU µs per item."""
    out, cpu = measured(pid, lambda: run(cmd, 900, what=what))
    res = parse_result(out)
    res["cpu_us"] = cpu * 1e6 / per(res)
    return res


def run_rpc(ctx) -> Section:
    peer = Peer("nats", "NATS")
    peer.label = f"NATS {peer.version()}"
    sec = Section("rpc", "RPC over MQ", peer.label)
    try:
        peer.start()
    except BenchError as e:
        sec.problems.append(f"{peer.label} could not be started: {e}")
        return sec
    ctx.servers["nats"] = {"label": peer.label, "start_secs": peer.start_secs, "idle_rss_kib": peer.idle_rss_kib}
    sides = {"peer": peer.label, "nagare": "nagare"}
    try:
        ctx.nagare.start()
        pid = {"peer": peer.pid, "nagare": ctx.nagare.pid}
        base = {"peer": ["-proto", "nats", "-addr", peer.addr],
                "nagare": ["-proto", "stomp", "-flavor", "nagare", "-addr", ctx.nagare.addr("stomp")]}
        np, nl = ctx.n(100_000, 10_000), ctx.n(20_000, 2_000)
        for c in (1, 4, 16, 64):
            for mode, n in (("pipelined", np), ("lockstep", nl)):
                label = f"rpc {mode} c={c}"

                def one(side, r, c=c, mode=mode, n=n):
                    cmd = [ctx.go_client, "rpc", *base[side], "-c", c, "-n", n, "-mode", mode]
                    if mode == "pipelined":
                        cmd += ["-window", RPC_WINDOW]
                    if r == 0:
                        ctx.record_commands(sec, label, {sides[side]: cmd})
                    return go_result(ctx, cmd, pid[side], f"rpc-{mode}-{c}-{side}", lambda res: res["items"])

                log(f"{label}: {n:,} requests, {ctx.rounds} rounds")
                res = alternate(ctx.rounds, label, sides, one)
                if mode == "pipelined":
                    wl = f"request/reply pipelined, c = {c} ({n:,} requests)"
                    sec.rows += [
                        fill(Row("RPC", wl, "Go: nats.go / raw STOMP", "throughput", "req/s", "higher",
                                 sides["peer"], goal=1.0, goal_text="≥ 1.0×"), res, "per_sec"),
                        fill(Row("RPC", wl, "Go: nats.go / raw STOMP", "server CPU per request", "µs", "lower",
                                 sides["peer"]), res, "cpu_us"),
                    ]
                else:
                    wl = f"request/reply lock-step, c = {c} ({n:,} requests)"
                    sec.rows += [
                        fill(Row("RPC", wl, "Go: nats.go / raw STOMP", "round trip p50", "µs", "lower",
                                 sides["peer"], goal_abs=50 if c == 1 else None,
                                 goal_text="< 50 µs" if c == 1 else ""), res, "p50_us"),
                        fill(Row("RPC", wl, "Go: nats.go / raw STOMP", "round trip p99", "µs", "lower",
                                 sides["peer"]), res, "p99_us"),
                        fill(Row("RPC", wl, "Go: nats.go / raw STOMP", "throughput", "req/s", "higher",
                                 sides["peer"]), res, "per_sec"),
                    ]
        sec.rows.append(rpc_floor(ctx, sec, nl))
    finally:
        ctx.nagare.stop()
        peer.stop()
    sec.notes += [
        "Floor: `nagare-bench-client floor -procs` sends the same lock-step requests through a relay "
        "process that only copies bytes between two loopback connections to an echoing process: the "
        "path of an RPC over a broker (four socket hand-offs across three processes) with no broker "
        "work at all. No broker's lock-step p50 can be below it on this machine; on these 2 virtual "
        "CPUs it is far above 50 µs (inside one process, `floor` without `-procs`, the same relay "
        "takes tens of µs: the cost is in waking other processes, not in the bytes).",
        "Same shape on both sides: one responder connection answers n with n+1; c client connections "
        "each have their own reply address and split the requests; every reply is checked (value, "
        "exactly once). NATS: nats.go publishes with a reply subject `INBOX.<n>` under one wildcard "
        "subscription (what nats.go's Request does). nagare: raw STOMP SEND to a queue with "
        "`reply-to:/temp-queue/NAME` and `correlation-id:<n>`.",
        "pipelined: each client keeps up to 1000 requests in flight and reads replies as they come; "
        "lock-step: one request in flight per client (throughput = c / round trip).",
        "Client difference that matters for lock-step latency: nats.go never writes in the publishing "
        "goroutine (its flusher goroutine does, woken by each publish), while the raw STOMP client writes "
        "each request itself; on a loaded 2-core machine that hand-off costs NATS some µs per round trip.",
        "NATS request/reply keeps nothing; nagare's service queue is a persistent queue (its requests "
        "go through the log, page cache only: no receipt is asked for).",
        "Client CPU differs as well, and on 2 shared cores a client's CPU is taken from the server: "
        "the raw STOMP client reads a frame with one allocation and used about 0.6–1.0 s of CPU per "
        "300,000 round trips, nats.go 0.9–1.4 s (measured apart from this run with /usr/bin/time, c = "
        "1 and 16). At c = 16 and 64 nagare's server CPU per request is higher than NATS's (rows "
        "above), so part of its throughput lead there comes from the cheaper client.",
    ]
    return sec


def rpc_floor(ctx, sec, n) -> Row:
    """The lock-step round trip with no broker (a relay process that copies bytes), once a
    round: what the < 50 µs goal is up against on this machine."""
    cmd = [ctx.go_client, "floor", "-procs", "-n", n]
    ctx.record_commands(sec, "rpc lock-step floor", {"no broker": cmd})
    vals = []
    for r in range(ctx.rounds):
        try:
            vals.append(parse_result(run(cmd, 300, what=f"rpc-floor-{r}"))["p50_us"])
        except BenchError as e:
            sec.problems.append(f"rpc floor round {r + 1}: {e}")
    log(f"rpc lock-step floor (no broker): p50 {vals} µs")
    return Row("RPC", f"lock-step floor, c = 1, no broker: a relay process that only copies bytes ({n:,} requests)",
               "Go: floor -procs", "round trip p50", "µs", "lower", "", nagare_vals=vals)


def run_stomp(ctx, name: str) -> Section:
    label = {"rabbitmq": "RabbitMQ", "activemq": "ActiveMQ"}[name]
    peer = Peer(name, label)
    peer.label = f"{label} {peer.version()}"
    sec = Section(f"stomp-{name}", f"STOMP messaging vs {label}", peer.label)
    try:
        peer.start()
    except BenchError as e:
        sec.problems.append(f"{peer.label} could not be started: {e}")
        return sec
    ctx.servers[name] = {"label": peer.label, "start_secs": peer.start_secs, "idle_rss_kib": peer.idle_rss_kib}
    sides = {"peer": peer.label, "nagare": "nagare"}
    try:
        ctx.nagare.start()
        pid = {"peer": peer.pid, "nagare": ctx.nagare.pid}
        base = {"peer": ["-flavor", name, "-addr", peer.addr],
                "nagare": ["-flavor", "nagare", "-addr", ctx.nagare.addr("stomp")]}
        nq, nf = ctx.n(30_000, 3_000), ctx.n(20_000, 2_000)

        def queue(side, r):
            cmd = [ctx.go_client, "queue", *base[side], "-n", nq, "-size", 100, "-window", 256]
            if r == 0:
                ctx.record_commands(sec, "persistent queue", {sides[side]: cmd})
            return go_result(ctx, cmd, pid[side], f"queue-{side}", lambda res: res["items"])

        log(f"persistent queue: {nq:,} messages, {ctx.rounds} rounds")
        res = alternate(ctx.rounds, "persistent queue", sides, queue)
        wl = f"persistent queue: SEND with receipt → client-ack consumer ({nq:,} × 100 B)"
        sec.rows += [
            fill(Row("STOMP", wl, "Go raw STOMP", "throughput", "msg/s", "higher", sides["peer"], goal=10,
                     goal_text="≥ 10×"), res, "per_sec"),
            fill(Row("STOMP", wl, "Go raw STOMP", "receipt p99", "µs", "lower", sides["peer"]), res, "p99_us"),
            fill(Row("STOMP", wl, "Go raw STOMP", "broker CPU per message", "µs", "lower", sides["peer"]),
                 res, "cpu_us"),
        ]

        def fanout(side, r):
            cmd = [ctx.go_client, "fanout", *base[side], "-n", nf, "-subs", 10, "-size", 100]
            if r == 0:
                ctx.record_commands(sec, "topic fan-out", {sides[side]: cmd})
            return go_result(ctx, cmd, pid[side], f"fanout-{side}", lambda res: res["items"])

        log(f"topic fan-out 1 → 10: {nf:,} messages, {ctx.rounds} rounds")
        res = alternate(ctx.rounds, "topic fan-out", sides, fanout)
        wl = f"topic fan-out 1 → 10 subscribers ({nf:,} × 100 B)"
        sec.rows += [
            fill(Row("STOMP", wl, "Go raw STOMP", "deliveries", "msg/s", "higher", sides["peer"], goal=10,
                     goal_text="≥ 10×"), res, "per_sec"),
            fill(Row("STOMP", wl, "Go raw STOMP", "broker CPU per delivery", "µs", "lower", sides["peer"]),
                 res, "cpu_us"),
        ]

        # The same two workloads with nagare's own load generator (`nagare bench queue|fanout`):
        # the performance goals are asked of it too.
        nbase = {"peer": ["--flavor", name, "--addr", peer.addr],
                 "nagare": ["--flavor", "nagare", "--addr", ctx.nagare.addr("stomp")]}
        for kind, n, extra, what, metric in (
                ("queue", nq, ["--window", 256], "persistent queue", "throughput"),
                ("fanout", nf, ["--subscribers", 10], "topic fan-out 1 → 10 subscribers", "deliveries")):
            def bench(side, r, kind=kind, n=n, extra=extra):
                cmd = [ctx.nagare_bin, "bench", kind, *nbase[side], "-n", n, "--size", 100, *extra]
                if r == 0:
                    ctx.record_commands(sec, f"nagare bench {kind}", {sides[side]: cmd})
                return go_result(ctx, cmd, pid[side], f"nagare-bench-{kind}-{side}", lambda res: res["items"])

            log(f"{what}: nagare bench {kind}, {n:,} messages, {ctx.rounds} rounds")
            res = alternate(ctx.rounds, f"{what} (nagare bench)", sides, bench)
            wl = (f"persistent queue: SEND with receipt → client-ack consumer ({n:,} × 100 B)" if kind == "queue"
                  else f"topic fan-out 1 → 10 subscribers ({n:,} × 100 B)")
            sec.rows += [
                fill(Row("STOMP", wl, "nagare bench", metric, "msg/s", "higher", sides["peer"], goal=10,
                         goal_text="≥ 10×"), res, "per_sec"),
                fill(Row("STOMP", wl, "nagare bench", "send → delivery p50", "µs", "lower", sides["peer"]),
                     res, "p50_us"),
            ]

        nr = ctx.n(20_000, 2_000)
        for c in (1, 16):
            def rpc(side, r, c=c):
                cmd = [ctx.go_client, "rpc", "-proto", "stomp", *base[side], "-c", c, "-n", nr, "-mode", "pipelined",
                       "-window", RPC_WINDOW]
                if r == 0:
                    ctx.record_commands(sec, f"temp-queue RPC c={c}", {sides[side]: cmd})
                return go_result(ctx, cmd, pid[side], f"stomp-rpc-{c}-{side}", lambda res: res["items"])

            log(f"temp-queue RPC pipelined c={c}: {nr:,} requests, {ctx.rounds} rounds")
            res = alternate(ctx.rounds, f"temp-queue RPC c={c}", sides, rpc)
            sec.rows.append(fill(Row("STOMP", f"temp-queue RPC pipelined, c = {c} ({nr:,} requests)",
                                     "Go raw STOMP", "throughput", "req/s", "higher", sides["peer"]), res, "per_sec"))
    finally:
        ctx.nagare.stop()
        peer.stop()
    sec.notes += [
        "Persistent queue: one producer SENDs with `persistent:true` and a receipt on every message, 256 "
        "receipts outstanding; one consumer (subscribed first, `ack:client`, prefetch 1000) ACKs "
        "cumulatively every 100 messages; the run ends when the last ACK is receipted. nagare fsyncs "
        "(group commit) before a queue SEND's receipt.",
        "Fan-out: 10 subscribers (`ack:auto`) on one `/topic/`, one producer, a receipt every 1000 SENDs "
        "with at most 2 outstanding; the run ends when every subscriber has every message.",
        "`nagare bench queue` and `nagare bench fanout` run the same two workloads with nagare's own "
        "load generator (one thread; its latency is send → delivery, taken from a stamp in each body).",
        "Temp-queue RPC: the same Go client as the RPC section (pipelined, 1000 requests in flight per "
        "client); ActiveMQ's requesters SUBSCRIBE to their temp queue, RabbitMQ's and nagare's do not.",
    ]
    return sec
