"""Cost lines of nagare alone: syscalls per message on each batched path (strace -c -f on the
running broker during a short run), idle RSS, and the time from exec to the "ready" line."""

import re
import signal
import subprocess
import time

from .common import OUT, BenchError, log, parse_result, rss_kib, run, show
from .model import Row, Section


def strace_run(ctx, label: str, cmd, per):
    """Attaches strace to the broker (every thread), runs the client, detaches; returns
    (syscalls per message, the top syscalls)."""
    out = OUT / "logs" / f"strace-{re.sub(r'[^a-z0-9]+', '-', label.lower())}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    st = subprocess.Popen(["strace", "-c", "-f", "-p", str(ctx.nagare.pid), "-o", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attaching every thread takes a moment
    try:
        res = parse_result(run(cmd, 900, what=f"strace-{label}"))
    finally:
        st.send_signal(signal.SIGINT)
        st.wait(30)
    calls, per_call = None, []
    for line in out.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[-1] == "total":
            calls = int(f[3])
        elif len(f) >= 5 and re.match(r"^[\d.]+$", f[0]) and re.match(r"^[a-z_0-9]+$", f[-1]):
            per_call.append((int(f[3]), f[-1]))
    if calls is None:
        raise BenchError(f"no strace summary in {out}")
    items = per(res)
    top = ", ".join(f"{name} {n / items:.3g}" for n, name in sorted(per_call, reverse=True)[:5])
    return calls / items, f"{calls:,} syscalls for {int(items):,} messages; per message: {top}"


def run_section(ctx) -> Section:
    sec = Section("cost", "Cost", "")
    # Startup and idle memory: fresh data directory each time.
    starts, rss = [], []
    for i in range(ctx.n(7, 3)):
        starts.append(ctx.nagare.start(quiet=True) * 1000)
        time.sleep(2)
        rss.append(rss_kib(ctx.nagare.pid) / 1024)
        ctx.nagare.stop()
    log(f"nagare startup to ready: {', '.join(f'{s:.0f}' for s in starts)} ms; idle RSS "
        f"{', '.join(f'{r:.1f}' for r in rss)} MiB")
    sec.rows += [
        Row("cost", "startup: exec to the \"ready\" log line (empty data directory)", "", "startup", "ms", "lower",
            "", nagare_vals=starts, goal_abs=50, goal_text="≤ 50 ms"),
        Row("cost", "idle RSS, 2 s after ready", "", "RSS", "MiB", "lower", "", nagare_vals=rss, goal_abs=15,
            goal_text="≤ 15 MiB"),
    ]
    sec.commands.append(("startup", show(ctx.nagare.command(ctx.nagare.dir / "data"))))
    if subprocess.run(["which", "strace"], capture_output=True).returncode != 0:
        sec.problems.append("strace is not installed: no syscall counts")
        return sec
    ctx.nagare.start()
    try:
        k, s, f = ctx.nagare.addr("kafka"), ctx.nagare.addr("stomp"), ctx.nagare.addr("forward")
        n = ctx.n(1_000_000, 100_000)
        paths = [
            ("Kafka produce 100 B acks=1", [ctx.nagare_bin, "bench", "produce", "--bootstrap", k, "--topic", "strace-p",
                                            "-n", n, "-s", 100, "--acks", 1], lambda r: r["items"], 0.01),
            ("Kafka produce 1 KiB acks=all", [ctx.nagare_bin, "bench", "produce", "--bootstrap", k, "--topic",
                                              "strace-pa", "-n", n // 4, "-s", 1024, "--acks", -1],
             lambda r: r["items"], 0.01),
            ("Kafka consume 100 B", [ctx.nagare_bin, "bench", "consume", "--bootstrap", k, "--topic", "strace-p",
                                     "-n", n], lambda r: r["items"], 0.01),
            ("forward PackedForward with ack", [ctx.nagare_bin, "bench", "forward", "--addr", f, "-n", n, "-c", 4],
             lambda r: r["items"], 0.01),
            ("forward Message mode with ack", [ctx.go_client, "forward", "-addr", f, "-n", n // 10, "-c", 4],
             lambda r: r["items"], None),
            ("STOMP topic fan-out 1 → 10 (per delivery)", [ctx.go_client, "fanout", "-addr", s, "-n", n // 50],
             lambda r: r["items"], None),
            ("STOMP persistent queue", [ctx.go_client, "queue", "-addr", s, "-n", n // 50], lambda r: r["items"], None),
            ("STOMP temp-queue RPC pipelined c=16", [ctx.go_client, "rpc", "-addr", s, "-c", 16, "-n", n // 20,
                                                     "-window", 1000],
             lambda r: r["items"], None),
        ]
        for label, cmd, per, goal in paths:
            try:
                v, detail = strace_run(ctx, label, cmd, per)
            except BenchError as e:
                sec.problems.append(f"strace {label}: {e}")
                continue
            log(f"syscalls per message, {label}: {v:.4f} ({detail})")
            sec.rows.append(Row("cost", f"syscalls per message: {label}", "strace -c -f", "syscalls/message",
                                "", "lower", "", nagare_vals=[v], goal_abs=goal,
                                goal_text="≤ 1 per 100" if goal else "", note=detail))
            sec.commands.append((f"strace: {label}", f"strace -c -f -p <nagare pid> & {show(cmd)}"))
    finally:
        ctx.nagare.stop()
    sec.notes.append("Each strace figure is one short run with strace attached to every thread of the broker "
                     "(strace slows the broker, not the count); the count includes the broker's own timers "
                     "and housekeeping during the run.")
    return sec
