"""kcat (librdkafka, Debian package): keyed messages with every codec, consumed from the start."""

import subprocess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def kcat(*args, stdin=None, timeout=20):
    return subprocess.run(
        ["kcat", *args], input=stdin, capture_output=True, timeout=timeout, check=True
    ).stdout


def test_kcat_every_codec_round_trips(nagare):
    b = nagare.kafka
    expected = []
    for codec in CODECS:
        lines = [f"key-{codec}-{i}:value-{codec}-{i}" for i in range(50)]
        expected += lines
        kcat("-b", b, "-t", "kc", "-P", "-K:", "-z", codec, stdin="\n".join(lines).encode() + b"\n")
    out = kcat("-b", b, "-t", "kc", "-C", "-o", "beginning", "-e", "-f", "%k:%s@%o\n")
    got = out.decode().splitlines()
    assert [g.split("@")[0] for g in got] == expected
    assert [int(g.split("@")[1]) for g in got] == list(range(len(expected)))


def test_kcat_metadata_lists_topic_and_broker(nagare):
    kcat("-b", nagare.kafka, "-t", "meta", "-P", stdin=b"x\n")
    out = kcat("-b", nagare.kafka, "-L", "-J").decode()
    import json

    md = json.loads(out)
    assert md["brokers"][0]["name"] == nagare.kafka
    assert any(t["topic"] == "meta" for t in md["topics"])
