"""Apache Kafka Streams 4.3.1, unmodified, against the broker: a word count with
processing.guarantee=exactly_once_v2 whose KTable lives in a compacted changelog topic that
Streams creates itself.

One JVM (java/src/main/java/nagare/WordCount.java) runs the app through: a first batch, a
crash in the middle of a transaction (the JVM halts; a second JVM with the same state
directory, hence the same transactional.id, fences and aborts the zombie's transaction), a
restart with the local state wiped (the KTable is restored from the changelog), and a third
batch. The output is read with isolation.level=read_committed: every word occurrence must
have produced exactly one committed update, so each word's values are 1, 2, ..., n with
nothing missing and nothing twice.
"""

import collections
import shutil
import struct
import uuid

import pytest
from confluent_kafka import Producer

from ecoutil import CommittedReader, JavaApp, bootstrap_of, broker_log, create_topics, topic_config

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def lines(seed, n):
    """n deterministic lines of 1-5 words."""
    out = []
    for i in range(n):
        k = 1 + (seed * 7 + i * 3) % 5
        out.append(" ".join(WORDS[(seed + i * j + j * j) % len(WORDS)] for j in range(k)))
    return out


def produce(bootstrap, topic, batch):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, line in enumerate(batch):
        p.produce(topic, key=str(i).encode(), value=line.encode())
    assert p.flush(30) == 0


def n_words(batch):
    return sum(len(line.split()) for line in batch)


@pytest.fixture
def broker(request):
    return bootstrap_of(request)


def test_streams_word_count_exactly_once_with_crash_and_restore(broker, tmp_path):
    bootstrap, nagare = broker
    run = uuid.uuid4().hex[:8]
    app_id, inp, out = f"wc-{run}", f"wc-in-{run}", f"wc-out-{run}"
    admin = create_topics(bootstrap, [(inp, 3, None), (out, 3, None)])
    state = tmp_path / "state"
    args = [bootstrap, app_id, inp, out, str(state)]
    reader = CommittedReader(bootstrap, out, 3)
    a, b, c = lines(1, 60), lines(2, 60), lines(3, 40)
    b = b[:30] + ["crashnow"] + b[30:]
    expected = collections.Counter(w for batch in (a, b, c) for line in batch for w in line.split())
    apps = []

    def fail(msg):
        return f"{msg}\n--- broker log ---\n{broker_log(nagare)}"

    try:
        # 1. First batch, processed by a running app, then a clean stop.
        app = JavaApp("nagare.WordCount", args, tmp_path / "streams-1.log")
        apps.append(app)
        produce(bootstrap, inp, a)
        app.cmd("start", "RUNNING", timeout=90)
        got = reader.wait_count(n_words(a), timeout=60)
        assert got == n_words(a), fail(f"batch 1: {got} of {n_words(a)} updates\n{app.log()}")
        app.cmd("stop", "STOPPED", timeout=60)

        # 2. The app crashes (JVM halt) in the middle of a transaction of the second batch.
        produce(bootstrap, inp, b)
        app.cmd("arm", "ARMED")
        app.cmd("start", "HALT", timeout=90)  # may halt before it reports RUNNING
        assert app.wait_exit(30) == 3
        app.close()

        # 3. A new JVM on the same state directory: same transactional.id, the zombie's
        #    transaction is aborted, the second batch is counted once.
        app = JavaApp("nagare.WordCount", args, tmp_path / "streams-2.log")
        apps.append(app)
        app.cmd("start", "RUNNING", timeout=90)
        want = n_words(a) + n_words(b)
        got = reader.wait_count(want, timeout=90)
        assert got == want, fail(f"after the crash: {got} of {want} updates\n{app.log()}")
        app.cmd("stop", "STOPPED", timeout=60)

        # 4. Local state wiped: the counts must come back from the compacted changelog.
        # (KafkaStreams.cleanUp() leaves the task directories of a stopped instance in 4.3.1,
        # so they are removed here; the process id file stays, keeping the transactional.id.)
        for d in (state / app_id).iterdir():
            if d.is_dir():
                shutil.rmtree(d)
        produce(bootstrap, inp, c)
        app.cmd("start", "RUNNING", timeout=90)
        want += n_words(c)
        got = reader.wait_count(want, timeout=60)
        assert got == want, fail(f"after the restore: {got} of {want} updates\n{app.log()}")
        restored = int(app.cmd("restored", "RESTORED").split()[1])
        assert restored > 0, fail(f"nothing was restored from the changelog: {app.seen}")
        app.cmd("stop", "STOPPED", timeout=60)
        reader.poll_for(1.0)  # anything committed twice would show up now
    finally:
        for x in apps:
            x.close()
        reader.close()

    per_word = collections.defaultdict(list)
    for part, offset, key, value in reader.records:
        per_word[key.decode()].append(struct.unpack(">q", value)[0])
    # Each word has one partition, so its updates are in order there.
    for w, n in expected.items():
        assert per_word[w] == list(range(1, n + 1)), fail(f"{w}: {per_word[w]} (want 1..{n})")
    assert set(per_word) == set(expected)

    changelog = f"{app_id}-counts-store-changelog"
    assert topic_config(admin, changelog, "cleanup.policy") == "compact", fail("changelog not compacted")
