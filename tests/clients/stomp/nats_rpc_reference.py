"""NATS request/reply reference for `nagare bench rpc` (not a test): the same workload
(a responder adds 1 to each number; every reply checked), pipelined (all requests
outstanding at once, per client) and lock-step, with nats-py on asyncio.

usage: python3 nats_rpc_reference.py [--port 4222] [--suite | -n N -c C]
The responder runs in its own process so it does not share the client's event loop.
"""

import argparse
import asyncio
import multiprocessing
import time

import nats


async def responder(port, ready):
    nc = await nats.connect(f"nats://127.0.0.1:{port}")

    async def handle(msg):
        await nc.publish(msg.reply, str(int(msg.data) + 1).encode())

    await nc.subscribe("rpc", cb=handle)
    await nc.flush()
    ready.set()
    while True:
        await asyncio.sleep(3600)


def run_responder(port, ready):
    asyncio.run(responder(port, ready))


async def client(nc, first, count, pipelined):
    async def one(i):
        r = await nc.request("rpc", str(i).encode(), timeout=60)
        assert int(r.data) == i + 1, (i, r.data)

    if pipelined:
        await asyncio.gather(*(one(i) for i in range(first, first + count)))
    else:
        for i in range(first, first + count):
            await one(i)


async def bench(port, n, c, pipelined):
    conns = [await nats.connect(f"nats://127.0.0.1:{port}") for _ in range(c)]
    per = [n // c + (1 if k < n % c else 0) for k in range(c)]
    firsts = [sum(per[:k]) for k in range(c)]
    t0 = time.perf_counter()
    await asyncio.gather(*(client(conns[k], firsts[k], per[k], pipelined) for k in range(c)))
    secs = time.perf_counter() - t0
    for nc in conns:
        await nc.close()
    return secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=4222)
    ap.add_argument("-n", type=int, default=32768)
    ap.add_argument("-c", type=int, default=1)
    ap.add_argument("--suite", action="store_true")
    a = ap.parse_args()
    ready = multiprocessing.Event()
    p = multiprocessing.Process(target=run_responder, args=(a.port, ready), daemon=True)
    p.start()
    ready.wait(10)
    plan = ([(32768, 1), (131072, 1), (524288, 1), (10000, 4), (10000, 16), (10000, 64)]
            if a.suite else [(a.n, a.c)])
    for n, c in plan:
        for pipelined in (True, False):
            secs = asyncio.run(bench(a.port, n, c, pipelined))
            mode = "pipelined" if pipelined else "lockstep"
            print(f"  rpc {mode} n={n} c={c}".ljust(40) + f"{n / secs:>12.0f} req/s", flush=True)
    p.terminate()


if __name__ == "__main__":
    main()
