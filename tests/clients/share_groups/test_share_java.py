"""Kafka share groups (KIP-932) with the Java KafkaShareConsumer (kafka-clients 4.3.1):
records shared one at a time between consumers, acknowledged (implicitly or explicitly:
ACCEPT, RELEASE, REJECT), redelivered with a higher delivery count, redelivered when the
acquisition lock of a dead consumer runs out, archived past the delivery limit, and the
delivery state kept across a restart and a SIGKILL. Built by setup.sh."""

import signal
import time
import uuid

from share_util import (consumed, create_topic, line, produce, run_worker, set_group_config,
                        start_worker, wait_polling)


def names(prefix):
    suffix = uuid.uuid4().hex[:8]
    return f"{prefix}-{suffix}", f"{prefix}-g-{suffix}"


def test_two_consumers_share_10000_records_each_accepted_once(nagare):
    topic, group = names("share-split")
    create_topic(nagare.kafka, topic, 3)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    env = {"IDLE_EXIT_MS": "4000", "MAX_POLL_RECORDS": "100"}
    procs = [start_worker(nagare.kafka, group, "consume", topic, 10_000, env=env)
             for _ in range(2)]
    try:
        for p in procs:
            wait_polling(p)
        # Many batches: a consumer acquires whole batches, so one batch per partition
        # could all go to whichever consumer fetches first.
        produce(nagare.kafka, topic, 10_000, partitions=3, chunk=500)
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    values = []
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
        got, counts = consumed(out)
        assert got, "each consumer gets a share: " + out + err
        assert set(counts) == {1}, "nothing was delivered twice"
        values += got
    assert sorted(int(v) for v in values) == list(range(10_000))


def test_release_redelivers_with_a_higher_delivery_count(nagare):
    topic, group = names("share-release")
    create_topic(nagare.kafka, topic, 1)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    produce(nagare.kafka, topic, 20)
    out = run_worker(nagare.kafka, group, "release", topic, 5)
    assert "OK released 5 redelivered 5" in out, out
    for ln in out.splitlines():
        if ln.startswith("record "):
            _, _, _, first, _, again = ln.split()
            assert (int(first), int(again)) == (1, 2), ln
    # Everything was accepted in the end: nothing is left for the group.
    out = run_worker(nagare.kafka, group, "consume", topic, 1, env={"DEADLINE_MS": "3000"})
    assert consumed(out) == ([], [])


def test_killed_consumer_records_come_back_after_the_lock_duration(nagare):
    topic, group = names("share-kill")
    create_topic(nagare.kafka, topic, 1)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest",
                     share_record_lock_duration_ms=5000)
    produce(nagare.kafka, topic, 200)
    hang = start_worker(nagare.kafka, group, "hang", topic, env={"MAX_POLL_RECORDS": "50"})
    try:
        first = hang.stdout.readline()
        assert first.startswith("acquired "), first + hang.stderr.read()
        acquired = int(first.split()[1])
        assert acquired > 0
        hang.send_signal(signal.SIGKILL)
        hang.wait(10)
    finally:
        if hang.poll() is None:
            hang.kill()
    killed_at = time.time()
    out = run_worker(nagare.kafka, group, "consume", topic, 200)
    values, counts = consumed(out)
    assert sorted(int(v) for v in values) == list(range(200))
    # The dead consumer's records came back once their lock ran out, counted twice.
    assert counts.count(2) >= acquired, out
    assert set(counts) <= {1, 2}, out
    assert time.time() - killed_at >= 4


def test_record_released_past_the_delivery_limit_is_archived(nagare):
    topic, group = names("share-limit")
    create_topic(nagare.kafka, topic, 1)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest",
                     share_delivery_count_limit=3)
    produce(nagare.kafka, topic, 4)
    out = run_worker(nagare.kafka, group, "reject", topic)
    deliveries = {}
    for item in line(out, "deliveries"):
        value, times, max_count = item.split(":")
        deliveries[value] = (int(times), int(max_count))
    assert deliveries == {str(i): (3, 3) for i in range(4)}, out
    # Archived: nobody gets them again.
    out = run_worker(nagare.kafka, group, "consume", topic, 1, env={"DEADLINE_MS": "3000"})
    assert consumed(out) == ([], [])


def test_auto_offset_reset_latest_is_the_default(nagare):
    topic, group = names("share-latest")
    create_topic(nagare.kafka, topic, 1)
    produce(nagare.kafka, topic, 10)
    proc = start_worker(nagare.kafka, group, "consume", topic, 5)
    try:
        wait_polling(proc)
        # Where "latest" lands depends on when the group first fetches, which a loaded
        # machine delays: keep producing newer records until the consumer has 5.
        start = 100
        deadline = time.time() + 60
        while proc.poll() is None and time.time() < deadline:
            produce(nagare.kafka, topic, 5, start=start)
            start += 5
            time.sleep(1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    values = sorted(int(v) for v in consumed(out)[0])
    assert len(values) >= 5 and values[0] >= 100, "none of the records before it joined"
    assert values == list(range(values[0], values[0] + len(values))), "in order, none skipped"


def test_delivery_state_survives_restart_and_sigkill(nagare):
    topic, group = names("share-restart")
    create_topic(nagare.kafka, topic, 2)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    produce(nagare.kafka, topic, 300, partitions=2)
    env = {"MAX_POLL_RECORDS": "10"}
    seen = []
    out = run_worker(nagare.kafka, group, "consume", topic, 100, env=env)
    seen += consumed(out)[0]
    nagare.restart()
    out = run_worker(nagare.kafka, group, "consume", topic, 100, env=env)
    seen += consumed(out)[0]
    time.sleep(1.5)  # the acknowledgements reach the page cache, as a crash would find them
    nagare.restart(sig=signal.SIGKILL)
    out = run_worker(nagare.kafka, group, "consume", topic, 300,
                     env={**env, "IDLE_EXIT_MS": "3000"})
    seen += consumed(out)[0]
    assert sorted(int(v) for v in seen) == list(range(300))
