"""Rebalance timings with confluent-kafka against any broker (nagare or Apache Kafka):
  join:  2nd consumer's subscribe() -> both consumers hold their assignment (2 + 2 of 4)
  leave: 1st consumer's close() (LeaveGroup) -> the other holds all 4 partitions
Usage: measure_rebalance.py BOOTSTRAP [TRIALS] [HEARTBEAT_MS=500]. Not a test; prints medians."""

import statistics
import sys
import time
import uuid

from groups_util import consumer, create_topic, poll_until


def main():
    bootstrap = sys.argv[1]
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    heartbeat = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    conf = {"heartbeat.interval.ms": heartbeat}
    topic = "rebalance-" + uuid.uuid4().hex[:8]
    create_topic(bootstrap, topic, 4)
    time.sleep(1)
    joins, leaves = [], []
    for _ in range(trials):
        group = "m-" + uuid.uuid4().hex
        a = consumer(bootstrap, group, **conf)
        a.subscribe([topic])
        assert poll_until([a], lambda: len(a.assignment()) == 4, 30)
        b = consumer(bootstrap, group, **conf)
        t0 = time.time()
        b.subscribe([topic])
        ok = poll_until([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 30)
        assert ok
        joins.append(time.time() - t0)
        t1 = time.time()
        b.close()
        assert poll_until([a], lambda: len(a.assignment()) == 4, 30)
        leaves.append(time.time() - t1)
        a.close()
    fmt = lambda xs: f"median {statistics.median(xs)*1000:.0f} ms (min {min(xs)*1000:.0f}, max {max(xs)*1000:.0f})"  # noqa: E731
    print(f"{bootstrap}: {trials} trials, heartbeat.interval.ms={heartbeat} session.timeout.ms=6000")
    print(f"  join  (2nd subscribe -> both assigned): {fmt(joins)}")
    print(f"  leave (close -> other has all 4):       {fmt(leaves)}")


if __name__ == "__main__":
    main()
