#!/usr/bin/env python3
"""Figures for cluster mode (run by hand; not a test):

- forward ingestion, events/s acknowledged (`nagare bench forward`: PackedForward chunks
  with acks), through 1 gateway and through 2 gateways;
- STOMP queue throughput, messages/s from the first SEND to the last consumed (stomp.py,
  2 producers and 2 client-individual consumers, each its own process), all on 1 gateway,
  or spread over 2;
- temp-queue RPC latency p50/p99 (stomp.py, lock-step): the embedded store (`--store
  local`), cluster mode with requester and responder on one gateway, and across two;
- a Kafka broker SIGKILL under receipted STOMP SENDs and forward acks through a gateway:
  seconds from the kill to the first acknowledgement of a write sent after it, and the
  longest time without any acknowledgement.

    NAGARE_BIN=target/release/nagare tests/clients/cluster/measure_cluster.py [--quick]

The Kafka cluster of scripts/kafka-cluster (BASEPORT $NAGARE_TEST_KAFKA_BASEPORT, 19092)
is started if it is not running (and then stopped at the end). Prints a table.
"""

import argparse
import multiprocessing as mp
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import stomp

from clusterutil import BIN, Collector, Gateway, KafkaCluster, Nagare, stomp_connect, uid
from loadgen import ForwardLoad, StompSender, first_sent_after, longest_gap


# ---- forward ingestion -------------------------------------------------------------------

def bench_forward(addrs, events, connections):
    """Runs one `nagare bench forward` per address at once; returns acknowledged events/s
    in total (events of all runs over the longest run)."""
    procs = [subprocess.Popen([BIN, "bench", "forward", "--addr", f"{h}:{p}", "-n", str(events),
                               "-c", str(connections), "--tag", f"measure.fwd.{uid()}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for h, p in addrs]
    items, secs = 0, 0.0
    for p in procs:
        out, _ = p.communicate(timeout=600)
        m = re.search(r"^RESULT .* items=(\d+) secs=([\d.]+)", out, re.M)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"bench forward failed:\n{out[-2000:]}")
        items += int(m.group(1))
        secs = max(secs, float(m.group(2)))
    return items / secs


# ---- STOMP queue throughput --------------------------------------------------------------

def _producer(addr, dest, n, size, go, out):
    conn = stomp.Connection12([addr], heartbeats=(0, 0))
    col = Collector()
    conn.set_listener("c", col)
    conn.connect(wait=True)
    body = "x" * size
    go.wait()
    t0 = time.time()
    for i in range(n):
        conn.send(dest, body, receipt=f"r{i}" if i == n - 1 or i % 500 == 499 else None)
    col.receipt(f"r{n - 1}", timeout=300)
    out.put(("producer", t0, time.time(), n))
    conn.disconnect()


def _consumer(addr, dest, total, counter, ready, out):
    conn = stomp.Connection12([addr], heartbeats=(0, 0))
    state = {"n": 0, "first": None, "last": None}

    class L(stomp.ConnectionListener):
        def on_message(self, frame):
            now = time.time()
            state["first"] = state["first"] or now
            state["last"] = now
            state["n"] += 1
            with counter.get_lock():
                counter.value += 1
            conn.ack(frame.headers["ack"])

    col = Collector()
    conn.set_listener("c", col)
    conn.set_listener("l", L())
    conn.connect(wait=True)
    conn.subscribe(dest, id="q", ack="client-individual", headers={"prefetch-count": "200"}, receipt="s")
    col.receipt("s", timeout=30)
    ready.put(1)
    deadline = time.time() + 600
    while counter.value < total and time.time() < deadline:
        time.sleep(0.05)
    out.put(("consumer", state["first"], state["last"], state["n"]))
    conn.disconnect()


def queue_throughput(producer_addrs, consumer_addrs, n, size):
    """Messages/s from the first SEND to the last MESSAGE consumed."""
    ctx = mp.get_context("spawn")
    dest = f"/queue/measure-{uid()}"
    total = n * len(producer_addrs)
    counter, go, out, ready = ctx.Value("l", 0), ctx.Event(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_consumer, args=(a, dest, total, counter, ready, out)) for a in consumer_addrs]
    procs += [ctx.Process(target=_producer, args=(a, dest, n, size, go, out)) for a in producer_addrs]
    for p in procs:
        p.start()
    for _ in consumer_addrs:
        ready.get(timeout=60)
    time.sleep(2)  # the gateways' share consumers have joined the group
    go.set()
    results = [out.get(timeout=700) for _ in procs]
    for p in procs:
        p.join(30)
    start = min(r[1] for r in results if r[0] == "producer")
    end = max(r[2] for r in results if r[0] == "consumer" and r[2])
    consumed = sum(r[3] for r in results if r[0] == "consumer")
    split = "+".join(str(r[3]) for r in results if r[0] == "consumer")
    return consumed / (end - start), consumed, total, split


# ---- RPC latency -------------------------------------------------------------------------

def rpc_latency(requester_gw, responder_gw, n, warmup=50):
    service = f"/queue/measure-rpc-{uid()}"
    responder = stomp_connect(responder_gw)

    class Responder(stomp.ConnectionListener):
        def on_message(self, frame):
            responder.send(frame.headers["reply-to"], frame.body,
                           headers={"correlation-id": frame.headers["correlation-id"]})

    responder.set_listener("r", Responder())
    responder.subscribe(service, id="rpc", ack="auto", receipt="s")
    responder.collector.receipt("s", timeout=30)
    time.sleep(1)
    requester = stomp_connect(requester_gw)
    lat = []
    for i in range(warmup + n):
        t0 = time.perf_counter()
        requester.send(service, str(i), headers={"reply-to": "/temp-queue/m", "correlation-id": str(i)})
        f = requester.collector.messages.get(timeout=30)
        assert f.headers["correlation-id"] == str(i), f.headers
        if i >= warmup:
            lat.append(time.perf_counter() - t0)
    requester.disconnect()
    responder.disconnect()
    q = statistics.quantiles(lat, n=100)
    return q[49] * 1000, q[98] * 1000


# ---- broker failure ----------------------------------------------------------------------

def broker_kill(cluster, gw, window=30):
    """Receipted STOMP SENDs and forward acks into one topic through `gw`; SIGKILLs the
    topic's partition leader. Returns {load: (first ack after the kill, longest gap)}."""
    topic = f"measure-unavail-{uid()}"
    sender = StompSender(f"m{uid()[:4]}", [gw.stomp], lambda i: f"/topic/{topic}")
    sender.start()
    fwd = ForwardLoad([gw.forward], topic, "mf", "-conns", "2")
    try:
        deadline = time.time() + 60
        while (not sender.acked_ids() or not fwd.acked_ids()) and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(3)
        victim = cluster.leader(topic)
        cluster.kill(victim)
        # Taken once the kill is done: the script takes a while to start, and writes sent
        # before the broker is actually gone are acknowledged as usual.
        t_kill = time.time()
        time.sleep(window)
        t_end = time.time()
    finally:
        sender.stop(drain=10)
        fwd.stop()
    cluster.restart(victim)
    cluster.wait_isr(topic, 3)
    out = {}
    for name, load in (("STOMP receipted SEND", sender), ("forward with ack", fwd)):
        out[name] = (first_sent_after(load.ack_pairs(), t_kill), longest_gap(load.ack_times(), t_kill, t_end))
    return victim, out


# ---- main --------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    ap.add_argument("--skip", default="", help="comma list of: forward,queue,rpc,kill")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    fwd_events = 100_000 if args.quick else 500_000
    queue_msgs = 2_000 if args.quick else 10_000
    rpc_n = 200 if args.quick else 1000

    cluster = KafkaCluster()
    started = not cluster.running()
    if started:
        print("starting the Kafka cluster ...", flush=True)
        cluster.start()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="nagare-measure-"))
    procs = []

    def gateway(node_id):
        d = tmp / f"gw{node_id}"
        d.mkdir()
        g = Gateway(d / "data", cluster.store, node_id)
        procs.append(g)
        return g.start().wait_ready()

    rows = []
    try:
        a, b = gateway(1), gateway(2)
        if "forward" not in skip:
            one = bench_forward([a.forward], fwd_events, 4)
            two = bench_forward([a.forward, b.forward], fwd_events // 2, 4)
            rows.append(("forward ingestion, events/s acked", f"{one:,.0f}", f"{two:,.0f}", f"{two / one:.2f}x"))
            print(rows[-1], flush=True)
        if "queue" not in skip:
            one, c1, t1, s1 = queue_throughput([a.stomp, a.stomp], [a.stomp, a.stomp], queue_msgs, 100)
            two, c2, t2, s2 = queue_throughput([a.stomp, b.stomp], [a.stomp, b.stomp], queue_msgs, 100)
            rows.append(("STOMP /queue, msgs/s (2 prod + 2 cons)", f"{one:,.0f} ({c1}/{t1})",
                         f"{two:,.0f} ({c2}/{t2}, split {s2})", f"{two / one:.2f}x"))
            print(rows[-1], flush=True)
        lat_rows = []
        if "rpc" not in skip:
            d = tmp / "local"
            d.mkdir()
            local = Nagare(d / "data", ["--store", "local"])
            procs.append(local)
            local.start()
            lat_rows.append(("embedded store (--store local)",) + rpc_latency(local, local, rpc_n))
            lat_rows.append(("cluster, requester and responder on A",) + rpc_latency(a, a, rpc_n))
            lat_rows.append(("cluster, requester on A, responder on B",) + rpc_latency(a, b, rpc_n))
            print(lat_rows, flush=True)
        kill = None
        if "kill" not in skip:
            kill = broker_kill(cluster, a)
            print(kill, flush=True)
    finally:
        for p in procs:
            if p.alive():
                p.stop()
        if started:
            cluster.stop()

    print(f"\ncluster mode figures ({BIN}; 3 Kafka 4.3.1 brokers on the same machine)\n")
    if rows:
        print(f"| {'throughput':40} | {'1 gateway':>22} | {'2 gateways':>34} | {'2 vs 1':>6} |")
        print(f"|{'-' * 42}|{'-' * 24}|{'-' * 36}|{'-' * 8}|")
        for r in rows:
            print(f"| {r[0]:40} | {r[1]:>22} | {r[2]:>34} | {r[3]:>6} |")
        print()
    if lat_rows:
        print(f"| {'temp-queue RPC, lock-step, stomp.py':42} | {'p50 ms':>8} | {'p99 ms':>8} |")
        print(f"|{'-' * 44}|{'-' * 10}|{'-' * 10}|")
        for name, p50, p99 in lat_rows:
            print(f"| {name:42} | {p50:8.2f} | {p99:8.2f} |")
        print()
    if kill:
        victim, res = kill
        print(f"| {f'broker SIGKILL (node {victim}, partition leader)':42} | {'first new write acked, s':>18} | {'longest gap, s':>14} |")
        print(f"|{'-' * 44}|{'-' * 20}|{'-' * 16}|")
        for name, (first, gap) in res.items():
            first_s = f"{first:.2f}" if first is not None else "none"
            print(f"| {name:42} | {first_s:>18} | {gap:14.2f} |")


if __name__ == "__main__":
    sys.exit(main())
