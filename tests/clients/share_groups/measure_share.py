"""Share-consume figures with the Java KafkaShareConsumer against a running broker:
throughput (records/s draining a pre-filled topic) and per-record latency (produce
timestamp to poll, while a producer sends at a steady rate). Not a test: run by hand,
e.g. `python measure_share.py 127.0.0.1:9092` (the same against Apache Kafka 4.3.1 for
the comparison). Prints one line per figure."""

import sys
import time
import uuid

from confluent_kafka import Producer

from share_util import create_topic, run_worker, set_group_config, start_worker, wait_polling

VALUE = b"x" * 100


def fill(bootstrap, topic, n):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=VALUE)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


def throughput(bootstrap, n):
    topic, group = f"share-perf-{uuid.uuid4().hex[:8]}", f"share-perf-g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    set_group_config(bootstrap, group, share_auto_offset_reset="earliest")
    fill(bootstrap, topic, n)
    out = run_worker(bootstrap, group, "perf", topic, n, timeout=600,
                     env={"DEADLINE_MS": "300000"})
    line = next(ln for ln in out.splitlines() if ln.startswith("perf "))
    fields = dict(kv.split("=") for kv in line.split()[1:])
    records, ms = int(fields["records"]), int(fields["ms"])
    print(f"throughput records={records} ms={ms} records/s={records * 1000 / max(ms, 1):.0f}")


def latency(bootstrap, rate, seconds):
    topic, group = f"share-lat-{uuid.uuid4().hex[:8]}", f"share-lat-g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    n = rate * seconds
    worker = start_worker(bootstrap, group, "perf", topic, n, env={"DEADLINE_MS": "120000"})
    wait_polling(worker)  # joined (latest: only what is sent from now on)
    time.sleep(1)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    start = time.time()
    for i in range(n):
        p.produce(topic, value=VALUE)
        p.poll(0)
        wait = start + (i + 1) / rate - time.time()
        if wait > 0:
            time.sleep(wait)
    p.flush(30)
    out, err = worker.communicate(timeout=180)
    assert worker.returncode == 0, out + err
    line = next(ln for ln in out.splitlines() if ln.startswith("latency "))
    print(f"latency rate={rate}/s records={n} {line[len('latency '):]} (ms)")


if __name__ == "__main__":
    bootstrap = sys.argv[1]
    throughput(bootstrap, int(sys.argv[2]) if len(sys.argv) > 2 else 200_000)
    latency(bootstrap, 1000, 10)
