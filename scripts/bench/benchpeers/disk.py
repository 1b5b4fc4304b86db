"""`nagare bench produce` absolute records/s and bytes/s next to `dd` on the same disk."""

import re

from .common import STATE, BenchError, log, parse_result, run
from .model import Row, Section, alternate, fill

DD_RE = re.compile(r"(\d+) bytes .* copied, ([\d.]+) s")


def dd_write(mib: int, sync: bool):
    path = STATE / "dd.tmp"
    STATE.mkdir(parents=True, exist_ok=True)
    cmd = ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}"] + (["conv=fdatasync"] if sync else [])
    try:
        out = run(cmd, 900, what="dd")
    finally:
        path.unlink(missing_ok=True)
    m = DD_RE.search(out)
    if not m:
        raise BenchError("no dd summary:\n" + out)
    return cmd, int(m.group(1)) / float(m.group(2)) / 1e6


def run_section(ctx) -> Section:
    sec = Section("disk", "Produce against the disk's limit", "dd")
    ctx.nagare.start()
    try:
        cases = [(100, "1", ctx.n(5_000_000, 200_000), False), (1024, "1", ctx.n(1_000_000, 50_000), False),
                 (1024, "-1", ctx.n(1_000_000, 50_000), True)]
        for size, acks, n, sync in cases:
            mib = max(64, n * size >> 20)
            dd_label = "dd conv=fdatasync" if sync else "dd (page cache)"
            sides = {"peer": dd_label, "nagare": "nagare"}
            label = f"nagare bench produce {size} B acks={acks}"

            def one(side, r, size=size, acks=acks, n=n, sync=sync, mib=mib):
                if side == "peer":
                    cmd, mbs = dd_write(mib, sync)
                    if r == 0:
                        ctx.record_commands(sec, f"{dd_label} {mib} MiB", {"dd": cmd})
                    return {"mb_per_sec": mbs}
                cmd = [ctx.nagare_bin, "bench", "produce", "--bootstrap", ctx.nagare.addr("kafka"),
                       "--topic", f"bp-{size}-{acks.replace('-', 'm')}-{r}", "-n", n, "-s", size, "--acks", acks]
                if r == 0:
                    ctx.record_commands(sec, label, {"nagare": cmd})
                res = parse_result(run(cmd, 900, what=f"bench-produce-{size}"))
                return {"mb_per_sec": res["mb_per_sec"], "per_sec": res["per_sec"], "p99_us": res["p99_us"]}

            log(f"{label}: {n:,} records, next to {dd_label} {mib} MiB, {ctx.rounds} rounds")
            res = alternate(ctx.rounds, label, sides, one, writes=True)
            wl = f"{label} ({n:,} records)"
            sec.rows += [
                fill(Row("disk", wl, "nagare bench produce", "records/s", "records/s", "higher", ""), res, "per_sec"),
                fill(Row("disk", wl, "nagare bench produce", "value bytes/s (vs dd: fraction of the disk)", "MB/s",
                         "higher", dd_label), res, "mb_per_sec"),
                fill(Row("disk", wl, "nagare bench produce", "request latency p99", "µs", "lower", ""), res, "p99_us"),
            ]
            sec.rows[-3].peer_vals = []
            sec.rows[-1].peer_vals = []
    finally:
        ctx.nagare.stop()
    sec.notes += [
        "`dd` writes 1 MiB blocks of zeros to a file beside nagare's data directory: without `conv=fdatasync` "
        "it measures the page cache (what acks=1 rides), with it the disk (what nagare's acks=all waits for). "
        "nagare's bytes are record values only; on disk each 100 B record carries ~10 B of framing more.",
    ]
    return sec
