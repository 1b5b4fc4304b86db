"""A gateway whose Kafka cluster is down stays up, says it is not ready, answers clients
promptly without acknowledging anything, and becomes ready by itself once the cluster is
there; the clients it had then work.

The cluster that is down is the session's own before it starts (this test runs first among
the cluster tests, see conftest.py), which it then starts for the other tests; when the
session's cluster already runs, a second one on other ports with its own state."""

import queue
import time

from clusterutil import BASEPORT, KafkaCluster, stomp_connect, uid
from loadgen import ForwardLoad

# Bounded answer time while the cluster is unreachable: a receipted SEND gets an ERROR or
# nothing within this many seconds.
PROMPT = 15
# How long a forward sender keeps trying without getting an ack while the cluster is down.
NO_ACK_WINDOW = 6


def test_gateway_started_against_a_down_cluster_waits_and_recovers_by_itself(
        gateway_factory, session_cluster, request, tmp_path):
    cluster, _ = session_cluster
    if cluster.running():
        cluster = KafkaCluster(BASEPORT + 300, state_dir=tmp_path / "cluster")
        assert not any(cluster.node_states().values()), f"a cluster already runs on {cluster.bootstrap}"
        start, stop = cluster.start, cluster.stop
    else:
        start, stop = (lambda: request.getfixturevalue("kafka_cluster")), (lambda: None)
    g = gateway_factory(1, store=cluster.store, ready=False)
    topic = f"unreachable-{uid()}"
    fwd = ForwardLoad([g.forward], topic, "down", "-timeout", "5s")
    t_fwd = time.time()
    try:
        # Up but not ready, with a reason.
        deadline = time.time() + PROMPT
        status, body = g.health()
        while status != 503 and time.time() < deadline:
            time.sleep(0.2)
            status, body = g.health()
        assert g.alive(), g.read_log()
        assert status == 503 and body.strip(), f"/healthz {status} {body!r} while the cluster is down"

        client = stomp_connect(g)
        t0 = time.time()
        client.send(f"/topic/{topic}", "during the outage", receipt="r-down")
        error = None
        try:
            error = client.collector.errors.get(timeout=PROMPT)
        except queue.Empty:
            pass
        waited = time.time() - t0
        assert client.collector.receipts.empty(), "a RECEIPT while the cluster is down"

        time.sleep(max(0.0, t_fwd + NO_ACK_WINDOW - time.time()))
        assert not fwd.acked_ids(), "a forward ack while the cluster is down"
        assert g.alive(), g.read_log()
        assert g.health()[0] == 503

        t_start = time.time()
        start()
        t_up = time.time()
        g.wait_ready(timeout=120)
        t_ready = time.time()
        # The same STOMP client (reconnecting if the ERROR closed its connection) now gets
        # its RECEIPT, and the forward sender that was refused its acks gets them.
        if not client.is_connected():
            client.connect(wait=True)
        client.send(f"/topic/{topic}", "after the outage", receipt="r-up")
        client.collector.receipt("r-up", timeout=30)
        deadline = time.time() + 60
        while not fwd.acked_ids() and time.time() < deadline:
            time.sleep(0.2)
        fwd.stop()
        assert fwd.acked_ids(), f"no forward ack after the cluster came back ({fwd.retry_lines[-3:]})"
        stored = [v for _, _, _, v, _ in cluster.read_topic(topic)]
        assert b"after the outage" in stored, stored
        client.disconnect()
        print(f"\nwhile down: /healthz 503 {body.strip()!r}; receipted SEND -> "
              f"{'ERROR ' + repr(error.headers.get('message')) if error else 'no receipt'} "
              f"after {waited:.1f}s; forward: {len(fwd.retried)} sends refused, 0 acked; "
              f"cluster start {t_up - t_start:.1f}s, gateway ready {t_ready - t_up:.1f}s after it")
    finally:
        if fwd.proc.poll() is None:
            fwd.proc.kill()
        g.stop()
        stop()
