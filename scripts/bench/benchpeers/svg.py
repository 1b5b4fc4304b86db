"""Small SVG bar charts (no plotting library needed): horizontal grouped bars, linear or
logarithmic, with the value written at the end of each bar."""

import math
from html import escape

FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
COLORS = {"peer": "#9aa5b1", "nagare": "#d9480f", "goal": "#2b8a3e"}


def _text(x, y, s, size=11, anchor="start", weight="normal", color="#222"):
    return (f"<text x='{x:.1f}' y='{y:.1f}' {FONT} font-size='{size}' text-anchor='{anchor}' "
            f"font-weight='{weight}' fill='{color}'>{escape(s)}</text>")


def bar_chart(title: str, groups, series, fmt, log=False, ref=None, width=900, label_width=380, from_ref=False,
              below_color=None, tick_fmt=None):
    """groups: [(label, [value or None per series], [text or None per series])];
    series: [(name, color)]. `fmt` writes a value, `tick_fmt` (default `fmt`) an axis tick.
    `ref`: a vertical reference line (value, label); with `from_ref` bars start at it (left
    of it when smaller, in `below_color`)."""
    tick_fmt = tick_fmt or fmt
    bar_h, gap, top = 13, 12, 56
    plot_w = width - label_width - 110
    values = [v for _, vs, _ in groups for v in vs if v]
    if ref:
        values.append(ref[0])
    if not values:
        return None
    vmax = max(values)
    if log:
        # A third of a decade below the smallest value, so that its bar is visible too
        # (a value on a power of ten would otherwise start where the axis starts).
        lo = math.floor(math.log10(min(values)) - 0.3)
        hi = math.ceil(math.log10(vmax))
        hi = hi if hi > lo else lo + 1

        def x(v):
            return label_width + plot_w * (math.log10(v) - lo) / (hi - lo)
    else:
        def x(v):
            return label_width + plot_w * v / (vmax * 1.02)
    def group_h(label):
        return max(len(series) * bar_h, len(_wrap(label, 58)[:3]) * 12 + 2)

    height = top + sum(group_h(g[0]) + gap for g in groups) + 30
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}'>", f"<rect width='{width}' height='{height}' fill='white'/>",
           _text(12, 22, title, 15, weight="bold")]
    lx = 12
    for name, color in series:
        out.append(f"<rect x='{lx}' y='34' width='12' height='12' fill='{color}'/>")
        out.append(_text(lx + 17, 44, name))
        lx += 24 + 7 * len(name)
    if log:
        for d in range(lo, hi + 1):
            gx = x(10 ** d)
            out.append(f"<line x1='{gx:.1f}' y1='{top - 4}' x2='{gx:.1f}' y2='{height - 24}' stroke='#e3e3e3'/>")
            out.append(_text(gx, height - 10, tick_fmt(10 ** d), 9, "middle", color="#666"))
    y = top
    for label, vals, texts in groups:
        gh = group_h(label)
        lines = _wrap(label, 58)
        for i, line in enumerate(lines[:3]):
            out.append(_text(label_width - 8, y + gh / 2 + 4 + (i - (len(lines[:3]) - 1) / 2) * 12, line, 10.5, "end"))
        for i, (name, color) in enumerate(series):
            v = vals[i] if i < len(vals) else None
            by = y + (gh - len(series) * bar_h) / 2 + i * bar_h
            if v:
                x0 = x(ref[0]) if from_ref and ref else label_width if not log else x(10 ** lo)
                left, right = min(x0, x(v)), max(x0, x(v))
                fill = below_color if below_color and x(v) < x0 else color
                out.append(f"<rect x='{left:.1f}' y='{by + 1:.1f}' width='{max(right - left, 1):.1f}' "
                           f"height='{bar_h - 2}' fill='{fill}'/>")
                t = texts[i] if texts and i < len(texts) and texts[i] else fmt(v)
                out.append(_text(right + 4, by + bar_h - 3, t, 10))
            else:
                out.append(_text(label_width + 4, by + bar_h - 3, "no figure", 10, color="#999"))
        y += gh + gap
    if ref:
        rx = x(ref[0])
        out.append(f"<line x1='{rx:.1f}' y1='{top - 6}' x2='{rx:.1f}' y2='{height - 24}' stroke='#222' "
                   f"stroke-dasharray='4,3'/>")
        out.append(_text(rx + 3, top - 8, ref[1], 10))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _wrap(s: str, n: int):
    words, lines, cur = s.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > n:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return lines
