"""Faults under load: a Kafka broker (the leader of the loaded partition) and then gateway A
are SIGKILLed while receipted STOMP SENDs (to a topic and to a queue) and forward events
with acks flow through both gateways. Afterwards the topics are read whole from the cluster
and every acknowledged id must be there; an id may appear twice only if its client sent it
again. The surviving gateway carries on (its clients reconnect, nothing is restarted), the
broker rejoins, and queue consumers end up with every acknowledged queue message."""

import collections
import json
import time

from clusterutil import stomp_connect, uid
from loadgen import ForwardLoad, QueueConsumer, StompSender, first_sent_after, longest_gap


def _wait_acks(loads, since, count, timeout, what):
    """Until every load has `count` acknowledgements after `since`; returns the seconds
    waited and the counts."""
    t0 = time.time()
    while True:
        counts = [sum(1 for x in load.ack_times() if x > since) for load in loads]
        if all(c >= count for c in counts):
            return time.time() - t0, counts
        if time.time() - t0 > timeout:
            raise AssertionError(f"{what}: acknowledgements per client {counts}, wanted {count} "
                                 f"each within {timeout}s")
        time.sleep(0.2)


def _occurrences(records, field):
    """How many times each id is stored (STOMP: the body; forward: the record's "id")."""
    counts = collections.Counter()
    for _, _, _, value, _ in records:
        counts[json.loads(value)["id"] if field == "json" else value.decode()] += 1
    return counts


def _check(name, acked, retried, stored):
    lost = acked - set(stored)
    dups = {k: v for k, v in stored.items() if v > 1}
    unexplained = {k: v for k, v in dups.items() if k not in retried}
    line = (f"{name}: {len(acked)} acked, {len(lost)} lost, {len(stored)} distinct stored, "
            f"{len(dups)} duplicated ({len(dups) - len(unexplained)} after a client retry), "
            f"{len(retried)} retried")
    return line, lost, unexplained


def test_broker_then_gateway_sigkill_under_load_loses_nothing_acknowledged(kafka_cluster, gateways):
    a, b = gateways
    u = uid()
    topic = f"faults-{u}"
    qname = f"faults-{u}"
    fwd_tag = f"faults.fwd.{u}"  # no route: the topic is the tag
    dest = lambda i: f"/queue/{qname}" if i % 4 == 3 else f"/topic/{topic}"  # noqa: E731
    timeline = []

    def mark(what):
        timeline.append((time.time(), what))

    consumers = [QueueConsumer("A", [a.stomp, b.stomp], f"/queue/{qname}"),
                 QueueConsumer("B", [b.stomp, a.stomp], f"/queue/{qname}")]
    for c in consumers:
        c.start()
    for c in consumers:
        assert c.subscribed.wait(30), c.errors
    # A steady load, paced so that three brokers, two gateways and the clients share two
    # cores without starving anyone: about 200 STOMP SENDs and 200 forward events a second
    # per gateway.
    senders = [StompSender(f"sA{u[:4]}", [a.stomp, b.stomp], dest, pace=0.005),
               StompSender(f"sB{u[:4]}", [b.stomp, a.stomp], dest, pace=0.005)]
    for s in senders:
        s.start()
    # The forward senders wait for an ack longer than the gateway may take to get the
    # cluster's (its delivery timeout), as Fluentd's out_forward does: a resend then means
    # the connection broke.
    fwd_args = ("-conns", "2", "-rate", "100", "-timeout", "30s")
    fwd = [ForwardLoad([a.forward, b.forward], fwd_tag, f"fA{u[:4]}", *fwd_args),
           ForwardLoad([b.forward, a.forward], fwd_tag, f"fB{u[:4]}", *fwd_args)]
    loads = senders + fwd
    try:
        mark("load started")
        _wait_acks(loads, 0, 20, 60, "warm-up")
        for t in (topic, f"queue.{qname}", fwd_tag):
            p = kafka_cluster.wait_topic(t)
            assert len(p.replicas) == 3, f"{t} has replicas {p.replicas}: cluster mode must use RF 3"
        victim = kafka_cluster.leader(topic)
        mark(f"SIGKILL broker {victim} (leader of {topic}-0)")
        kafka_cluster.kill(victim)
        # Once the broker is gone (not before the script started): writes sent before are
        # acknowledged as usual and say nothing about the failure.
        t_broker = time.time()
        # Every client is acknowledged again (the cluster elected new leaders), and a
        # little more, before the next fault.
        waited, counts = _wait_acks(loads, t_broker, 20, 60, f"after the SIGKILL of broker {victim}")
        time.sleep(2)
        mark(f"SIGKILL gateway A (every client acknowledged again after {waited:.1f}s: {counts})")
        t_gateway = time.time()
        a.kill()
        # Gateway A's clients reconnect to B.
        waited, counts = _wait_acks(loads, t_gateway, 20, 60, "after the SIGKILL of gateway A")
        time.sleep(2)
        mark(f"restart broker {victim} (every client acknowledged again after {waited:.1f}s: {counts})")
        kafka_cluster.restart(victim)
        t_back = time.time()
        mark(f"broker {victim} serves again")
        waited, counts = _wait_acks(loads, t_back, 20, 60, f"after the restart of broker {victim}")
        mark(f"stop load ({counts} acknowledgements since the broker came back)")
    finally:
        for s in senders:
            s.stop(drain=30)
        for f in fwd:
            f.stop()
    t_end = time.time()

    # The surviving gateway recovered by itself: ready, and a new client works at once.
    status, body = b.health()
    assert status == 200, f"gateway B /healthz {status} {body!r}"
    probe = stomp_connect(b)
    probe.send(f"/topic/{topic}", "probe", receipt="probe")
    probe.collector.receipt("probe", timeout=30)
    probe.disconnect()
    # The restarted broker caught up and is back in the ISR.
    kafka_cluster.wait_isr(topic, 3)

    # Offline check against what the clients saw acknowledged.
    stomp_acked = set().union(*(s.acked_ids() for s in senders))
    stomp_retried = set().union(*(s.retried for s in senders))
    topic_ids = _occurrences(kafka_cluster.read_topic(topic), "body")
    topic_ids.pop("probe", None)
    queue_ids = _occurrences(kafka_cluster.read_topic(f"queue.{qname}"), "body")
    fwd_acked = set().union(*(f.acked_ids() for f in fwd))
    fwd_retried = set().union(*(f.retried for f in fwd))
    fwd_ids = _occurrences(kafka_cluster.read_topic(fwd_tag), "json")
    queue_acked = {m for m in stomp_acked if int(m.rsplit("-", 1)[1]) % 4 == 3}
    topic_acked = stomp_acked - queue_acked

    # Queue consumers (the one of gateway A moved to B) end with every acknowledged message.
    deadline = time.time() + 60
    consumed = set()
    while time.time() < deadline:
        consumed = set().union(*(set(c.ids()) for c in consumers))
        if queue_acked <= consumed:
            break
        time.sleep(0.5)
    for c in consumers:
        c.stop()
    consumed_counts = collections.Counter(m for c in consumers for m in c.ids())

    report = [f"{t - timeline[0][0]:6.1f}s {what}" for t, what in timeline]
    results = [_check("STOMP /topic", topic_acked, stomp_retried, topic_ids),
               _check("STOMP /queue (stored)", queue_acked, stomp_retried, queue_ids),
               _check("forward", fwd_acked, fwd_retried, fwd_ids)]
    report += [line for line, _, _ in results]
    redelivered = sum(1 for v in consumed_counts.values() if v > 1)
    report.append(f"queue consumers: {len(consumed & queue_acked)} of {len(queue_acked)} acknowledged "
                  f"messages consumed, {redelivered} more than once (gateway A died holding some)")
    all_times = sorted(x for load in loads for x in load.ack_times())
    all_pairs = [p for load in loads for p in load.ack_pairs()]
    report.append(f"broker kill: first write sent after it acknowledged after "
                  f"{first_sent_after(all_pairs, t_broker):.2f}s, longest gap "
                  f"{longest_gap(all_times, t_broker, t_gateway):.2f}s; gateway kill: longest gap "
                  f"{longest_gap(all_times, t_gateway, t_end):.2f}s")
    for s in senders:
        report.append(f"{s.name}: {len(s.errors)} reconnects, e.g. {s.errors[:2]}")
    for f in fwd:
        report.append(f"forward {f.done}; retries e.g. {f.retry_lines[:2]}")
    print("\n" + "\n".join(report))

    for (line, lost, unexplained) in results:
        assert not lost, f"{line}: lost e.g. {sorted(lost)[:10]}"
        assert not unexplained, f"{line}: duplicates no client retried: {list(unexplained.items())[:10]}"
    assert queue_acked <= consumed, (f"{len(queue_acked - consumed)} acknowledged queue messages never "
                                     f"consumed, e.g. {sorted(queue_acked - consumed)[:10]}")
