"""BENCHMARKS.md and the charts in docs/bench/, from the results of the sections."""

import re
from pathlib import Path

from .common import median
from .model import fmt
from . import svg

ORDER = ["kafka", "kafka-txn", "kafka-codec", "rpc", "stomp-rabbitmq", "stomp-activemq", "forward", "disk", "cost"]


def si(v):
    if v is None:
        return "–"
    for div, suf in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


def duration(v, unit: str) -> str:
    """An axis tick of a latency chart, in the unit that reads best (1000 ms is "1 s")."""
    us = v * {"µs": 1, "ms": 1e3, "s": 1e6}[unit]
    for div, suf in ((1e6, "s"), (1e3, "ms"), (1, "µs")):
        if us >= div:
            return f"{us / div:.3g} {suf}"
    return f"{us:.3g} µs"


def adv_text(a):
    return "–" if a is None else (f"{a:.2f}×" if a < 10 else f"{a:.0f}×" if a >= 100 else f"{a:.1f}×")


def write(results: dict, md_path: Path, chart_dir: Path):
    sections = [results["sections"][k] for k in ORDER if k in results["sections"]]
    chart_dir.mkdir(parents=True, exist_ok=True)
    charts = charts_for(sections, chart_dir)
    rel = lambda p: str(p.relative_to(md_path.parent)) if p else None  # noqa: E731
    m = results["machine"]
    L = ["# Benchmarks", "",
         "Every figure below was written by [`scripts/bench-peers`](scripts/bench-peers) "
         "(each section says when and with which options): it starts each peer broker, runs the same client "
         "with the same settings against the peer and against nagare, **alternating** them round after round (the peer "
         "first in odd rounds, nagare first in even ones), and quotes the **median** of the rounds. The "
         "*advantage* is nagare's figure over the peer's in the **same round** (peer's over nagare's for "
         "latencies and CPU), so > 1× always means nagare did better; its median and every round's value "
         "are given. A run against a peer that could not be installed is reported, not hidden.", "",
         "**Caveat: a small, shared machine.** The client, the broker under test and whatever else runs on "
         "this virtual machine share 2 cores; the load average before → after each section was " + "; ".join(f"{s.key} {s.load}" for s in sections if s.load)
         + ". Absolute figures move by ±30 % or more between runs; ratios from one round are steadier than "
         "absolutes, and medians of several rounds steadier still. Do not compare these numbers with other "
         "machines.", "",
         "## Goals, where they stand", "",
         "| goal | workload | figure | nagare | peer | advantage | met |", "|---|---|---|---|---|---|---|"]
    for s in sections:
        for r in s.rows:
            if r.goal is None and r.goal_abs is None:
                continue
            met = r.goal_met()
            client = f" ({r.client})" if r.client else ""
            L.append(f"| {r.goal_text} | {r.workload} | {r.metric}{client} | {fmt(median(r.nagare_vals), r.unit)} | "
                     f"{fmt(median(r.peer_vals), r.unit) + ' (' + r.peer + ')' if r.peer else '–'} | "
                     f"{adv_text(median(r.advantages())) if r.peer else '–'} | "
                     f"{'yes' if met else 'no' if met is False else '–'} |")
    L += ["", "## Machine", ""]
    L += [f"- {k}: {v}" for k, v in m.items()]
    L += ["", "## Versions", "", "| software | version |", "|---|---|"]
    L += [f"| {k} | {v} |" for k, v in results["versions"].items()]
    if results.get("servers"):
        L += ["", "## Servers: start and idle memory", "",
              "Start: the peer script's `start` until the server accepts (Kafka: until it logs that it started, "
              "including the storage format); nagare: exec to its \"ready\" line. Idle RSS: the process tree, 2 s "
              "after start.", "", "| server | start | idle RSS |", "|---|---|---|"]
        for k, v in results["servers"].items():
            secs = v.get("start_secs")
            L.append(f"| {v.get('label', k)} | {fmt(secs * 1000 if secs < 1 else secs, 'ms' if secs < 1 else 's')} | "
                     f"{fmt(v['idle_rss_kib'] / 1024, 'MiB')} |")
    for s in sections:
        L += ["", f"## {s.title}", ""]
        L.append(f"Measured {s.measured_at}" + (f" against {s.peer}" if s.peer else "")
                 + (f", by `{s.command}`" if s.command else "") + (f", with {s.nagare}" if s.nagare else "") + ".")
        L.append("")
        for p in s.problems:
            L.append(f"> **Problem:** {p}")
            L.append("")
        if s.rows:
            L += ["| workload | client | figure | " + ("peer | " if s.peer else "") + "nagare | "
                  + ("advantage | per round | " if s.peer else "rounds | ") + "goal |",
                  "|---|---|---|" + ("---|" if s.peer else "") + "---|" + ("---|---|" if s.peer else "---|") + "---|"]
            for r in s.rows:
                unit = r.unit
                nv = fmt(median(r.nagare_vals), unit)
                if s.peer:
                    if r.peer:
                        pv = f"{fmt(median(r.peer_vals), unit)}" + (f" ({r.peer})" if r.peer != s.peer else "")
                        advs = r.advantages()
                        cells = f"{pv} | {nv} | **{adv_text(median(advs))}** | {', '.join(adv_text(a) for a in advs)}"
                    else:
                        cells = f"– | {nv} | – | {', '.join(fmt(v) for v in r.nagare_vals)}"
                else:
                    cells = f"{nv} | {', '.join(fmt(v) for v in r.nagare_vals)}"
                met = r.goal_met()
                goal = f"{r.goal_text} ({'met' if met else 'not met' if met is False else '?'})" if r.goal_text else ""
                L.append(f"| {r.workload} | {r.client} | {r.metric} | {cells} | {goal} |")
            extra = [r for r in s.rows if r.note]
            if extra:
                L.append("")
                L += [f"- {r.workload}: {r.note}" for r in extra]
        for c in charts.get(s.key, []):
            L += ["", f"![{s.title}]({rel(c)})"]
        if s.notes:
            L += ["", "Notes:", ""] + [f"- {n}" for n in s.notes]
        if s.commands:
            L += ["", "<details><summary>Exact commands (first round)</summary>", "", "```sh"]
            L += [f"# {what}\n{cmd}" for what, cmd in s.commands]
            L += ["```", "", "</details>"]
    if "advantage" in charts:
        L += ["", "## Every ratio at a glance", "", f"![advantage]({rel(charts['advantage'][0])})"]
    L += ["", "## Notes", ""] + [f"- {n}" for n in results.get("notes", [])]
    md_path.write_text("\n".join(L) + "\n")


def short(label: str) -> str:
    """A chart label: the workload without its sizes in parentheses."""
    return re.sub(r" \([^)]*\)", "", label)


def charts_for(sections, chart_dir: Path) -> dict:
    out = {}

    def save(key, name, text):
        if text:
            p = chart_dir / name
            p.write_text(text)
            out.setdefault(key, []).append(p)

    series = lambda peer: [(peer, svg.COLORS["peer"]), ("nagare", svg.COLORS["nagare"])]  # noqa: E731
    for s in sections:
        thr = [r for r in s.rows if r.better == "higher" and r.peer and r.unit.endswith("/s")]
        if thr:
            groups = [(f"{short(r.workload)} — {r.client}" if r.client and r.client not in r.workload
                       else short(r.workload),
                       [median(r.peer_vals), median(r.nagare_vals)], None) for r in thr]
            # Units differ between rows (records/s, req/s, msg/s): a log scale keeps each readable.
            save(s.key, f"{s.key}-throughput.svg",
                 svg.bar_chart(f"{s.title}: throughput (median of rounds; {thr[0].unit} etc.)", groups,
                               series(s.peer), si, log=True))
        lat = [r for r in s.rows if r.better == "lower" and r.peer and r.unit in ("ms", "µs")
               and ("p50" in r.metric or "p99" in r.metric or "average" in r.metric)]
        if lat:
            # One axis: every latency in µs when the section mixes units, else in its own.
            unit = lat[0].unit if len({r.unit for r in lat}) == 1 else "µs"
            scale = {r.unit: 1000 if (r.unit, unit) == ("ms", "µs") else 1 for r in lat}
            groups = [(f"{short(r.workload)}: {r.metric}",
                       [median(r.peer_vals) * scale[r.unit], median(r.nagare_vals) * scale[r.unit]],
                       [fmt(median(r.peer_vals), r.unit), fmt(median(r.nagare_vals), r.unit)]) for r in lat]
            save(s.key, f"{s.key}-latency.svg",
                 svg.bar_chart(f"{s.title}: latency percentiles (median of rounds, log scale)", groups,
                               series(s.peer), si, log=True, tick_fmt=lambda v, u=unit: duration(v, u)))
    rows = [(s, r) for s in sections for r in s.rows if r.peer and median(r.advantages())
            and (r.goal is not None or "throughput" in r.metric or "deliveries" in r.metric)]
    if rows:
        groups = [(f"{short(r.workload)} — {r.client}: {r.metric} vs {r.peer}", [median(r.advantages())],
                   [adv_text(median(r.advantages()))]) for s, r in rows]
        save("advantage", "advantage.svg",
             svg.bar_chart("nagare's advantage: throughput and every goal (median of per-round ratios, log scale)",
                           groups,
                           [("advantage (> 1× = nagare better)", svg.COLORS["nagare"])], adv_text, log=True,
                           ref=(1.0, "1× (parity)"), width=1000, label_width=520, from_ref=True,
                           below_color=svg.COLORS["peer"]))
    return out
