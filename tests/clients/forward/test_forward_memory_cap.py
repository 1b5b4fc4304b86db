"""The receiver-wide memory cap (max_buffered_bytes): many senders together push far more
than the cap; connections wait instead of buffering, and every acknowledged event lands."""

import threading
import urllib.request

from fwdutil import Conn, entries, event_time, kafka_read, pack, wait_log

CAP = 2 * 1024 * 1024
SENDERS = 24
CHUNKS = 6
EVENTS = 400  # per chunk, ~1 KiB each: ~400 KiB chunks, ~10 MiB in flight at once


def peak_rss_kib(nagare):
    with open(f"/proc/{nagare.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def send(nagare, tag, errors):
    try:
        c = Conn(nagare.forward, timeout=60)
        # Every chunk is written before any ack is read: all senders' chunks are in
        # flight together.
        for k in range(CHUNKS):
            evs = [(event_time(1_700_000_000 + k), {"seq": k * EVENTS + i, "pad": "p" * 1000})
                   for i in range(EVENTS)]
            c.send(pack([tag, entries(evs), {"chunk": f"{tag}-{k}"}]))
        for k in range(CHUNKS):
            assert c.reply() == {"ack": f"{tag}-{k}"}
        c.close()
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(f"{tag}: {e!r}")


def test_many_senders_beyond_the_cap_all_land(nagare_factory):
    nagare = nagare_factory(env={"NAGARE_FORWARD_MAX_BUFFERED_BYTES": str(CAP)})
    errors = []
    threads = [threading.Thread(target=send, args=(nagare, f"cap.s{i}", errors))
               for i in range(SENDERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for i in range(SENDERS):
        recs = kafka_read(nagare, f"cap.s{i}", CHUNKS * EVENTS, timeout=30)
        assert [int(v.split(b'"seq":')[1].split(b",")[0]) for _, v, _ in recs] == \
            list(range(CHUNKS * EVENTS))
    # The cap was reached: connections waited instead of reading.
    text = urllib.request.urlopen(f"http://{nagare.http}/metrics", timeout=10).read().decode()
    waits = [ln for ln in text.splitlines()
             if ln.startswith("nagare_forward_backpressure_waits_total")]
    assert waits and float(waits[0].split()[-1]) > 0, waits
    # Generous bound only (allocator, runtime and the log's own buffers count too).
    rss = peak_rss_kib(nagare)
    print(f"peak RSS {rss} KiB with {SENDERS} senders x {CHUNKS} chunks of ~400 KiB")
    assert rss < 400 * 1024


def test_a_chunk_larger_than_the_cap_is_refused(nagare_factory):
    nagare = nagare_factory(env={"NAGARE_FORWARD_MAX_BUFFERED_BYTES": str(CAP)})
    big = entries([(event_time(1_700_000_000), {"pad": "q" * (CAP + 1000)})])
    c = Conn(nagare.forward)
    try:
        try:
            c.send(pack(["cap.big", big, {"chunk": "big"}]))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert c.closed_by_server()
    finally:
        c.close()
    assert "exceeds max_buffered_bytes" in wait_log(nagare, "max_buffered_bytes")
    # Others are unaffected.
    c = Conn(nagare.forward)
    c.send(pack(["cap.small", entries([(event_time(1_700_000_000), {"seq": 0})]), {"chunk": "s"}]))
    assert c.reply() == {"ack": "s"}
    c.close()
