"""kcat 1.7.1 (librdkafka 2.0.2, Debian) as a balanced group consumer (-G): a second run
starts at the offsets the first one committed."""

import subprocess


def kcat(*args, stdin=None):
    r = subprocess.run(["kcat", *args], input=stdin, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_kcat_group_consumer_resumes_from_its_commit(nagare):
    b = nagare.kafka
    kcat("-b", b, "-P", "-t", "kc", stdin="\n".join(str(i) for i in range(50)) + "\n")
    assert kcat("-b", b, "-G", "kcgrp", "-o", "beginning", "-e", "-q", "kc") == [str(i) for i in range(50)]
    assert kcat("-b", b, "-G", "kcgrp", "-e", "-q", "kc") == []
    kcat("-b", b, "-P", "-t", "kc", stdin="50\n51\n52\n")
    assert kcat("-b", b, "-G", "kcgrp", "-e", "-q", "kc") == ["50", "51", "52"]
