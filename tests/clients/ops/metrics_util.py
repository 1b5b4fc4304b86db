"""Helpers of the ops tests: scrape and parse Prometheus' text format, read JSON routes."""

import base64
import json
import re
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def get(nagare, path, user=None, password=None):
    req = urllib.request.Request(f"http://{nagare.http}{path}")
    if user:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


def get_json(nagare, path, **kw):
    return json.loads(get(nagare, path, **kw))


class Scrape:
    """One /metrics page: HELP and TYPE per family, samples as (name, labels, value)."""

    def __init__(self, text):
        self.text = text
        self.help = {}
        self.type = {}
        self.samples = []
        for line in text.splitlines():
            if line.startswith("# HELP "):
                name, _, doc = line[7:].partition(" ")
                self.help[name] = doc
            elif line.startswith("# TYPE "):
                name, _, kind = line[7:].partition(" ")
                self.type[name] = kind
            elif line and not line.startswith("#"):
                m = SAMPLE.match(line)
                assert m, f"not a sample line: {line!r}"
                labels = dict(LABEL.findall(m.group(3) or ""))
                self.samples.append((m.group(1), labels, float(m.group(4))))

    def family_of(self, sample_name):
        """The family a sample belongs to (histogram series carry suffixes)."""
        for suffix in ("_bucket", "_sum", "_count"):
            base = sample_name[: -len(suffix)]
            if sample_name.endswith(suffix) and self.type.get(base) in ("histogram", "summary"):
                return base
        return sample_name

    def families(self):
        return set(self.type) | {self.family_of(n) for n, _, _ in self.samples}

    def values(self, name, **labels):
        return [v for n, l, v in self.samples
                if n == name and all(l.get(k) == str(want) for k, want in labels.items())]

    def total(self, name, **labels):
        return sum(self.values(name, **labels))


def scrape(nagare, **kw):
    return Scrape(get(nagare, "/metrics", **kw))
