"""The sign-off plots as inline SVG, written by hand.

Hand-written SVG keeps the report one self-contained file that needs neither JavaScript nor a
plotting dependency, and stays sharp when printed. Every text that goes in is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from reports.analysis import Cdf, Timeline
from reports.server_series import ServerSeries
from reports.ttft_decomposition import Component

# Okabe-Ito: told apart by colour-blind readers too.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
GREY = "#8c8c8c"
RED = "#c0392b"
FONT = "font-family='system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif'"
# A threshold further than this many times the data's range right of it is listed, not drawn:
# drawing it would squeeze the data into a sliver of the plot.
OFF_SCALE = 2.5


@dataclass(frozen=True)
class Marker:
    """An objective drawn on a plot: a threshold (seconds), at quantile ``q`` for a CDF."""

    label: str
    value: float
    q: float | None = None


def nice_ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k) covering [lo, hi]; whole numbers only for
    counts (``integer``)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * mag for m in steps if m * mag >= raw)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def _text_width(text: str, size: float = 11) -> float:
    """Rough width of a label in the sans-serif font (no font metrics without a browser)."""
    return len(text) * size * 0.58


def _num(v: float) -> str:
    return f"{v:.1f}"


def _label(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1 or v == 0 else f"{v:.3g}"


@dataclass(frozen=True)
class Frame:
    """A plotting area inside an SVG: maps data coordinates to pixels."""

    left: float
    top: float
    width: float
    height: float
    x0: float
    x1: float
    y0: float
    y1: float

    def x(self, v: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return self.left + (min(max(v, self.x0), self.x1) - self.x0) / span * self.width

    def y(self, v: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return (
            self.top + self.height - (min(max(v, self.y0), self.y1) - self.y0) / span * self.height
        )

    @property
    def bottom(self) -> float:
        return self.top + self.height

    @property
    def right(self) -> float:
        return self.left + self.width

    def axes(
        self, x_label: str, y_label: str, *, x_ticks: bool = True, y_integer: bool = False
    ) -> list[str]:
        out = [
            f"<rect x='{_num(self.left)}' y='{_num(self.top)}' width='{_num(self.width)}' "
            f"height='{_num(self.height)}' fill='#fbfbfb' stroke='#d0d0d0'/>"
        ]
        for t in nice_ticks(self.y0, self.y1, 4, integer=y_integer):
            y = self.y(t)
            out.append(
                f"<line x1='{_num(self.left)}' x2='{_num(self.right)}' y1='{_num(y)}' "
                f"y2='{_num(y)}' stroke='#e6e6e6'/>"
                f"<text x='{_num(self.left - 6)}' y='{_num(y + 4)}' text-anchor='end' "
                f"font-size='11' fill='#444'>{escape(_label(t))}</text>"
            )
        for t in nice_ticks(self.x0, self.x1, 8):
            x = self.x(t)
            out.append(
                f"<line x1='{_num(x)}' x2='{_num(x)}' y1='{_num(self.top)}' "
                f"y2='{_num(self.bottom)}' stroke='#eeeeee'/>"
            )
            if x_ticks:
                out.append(
                    f"<text x='{_num(x)}' y='{_num(self.bottom + 15)}' text-anchor='middle' "
                    f"font-size='11' fill='#444'>{escape(_label(t))}</text>"
                )
        if x_ticks:
            out.append(
                f"<text x='{_num(self.left + self.width / 2)}' y='{_num(self.bottom + 32)}' "
                f"text-anchor='middle' font-size='12' fill='#222'>{escape(x_label)}</text>"
            )
        cy = self.top + self.height / 2
        out.append(
            f"<text x='{_num(self.left - 44)}' y='{_num(cy)}' text-anchor='middle' "
            f"font-size='12' fill='#222' transform='rotate(-90 {_num(self.left - 44)} "
            f"{_num(cy)})'>{escape(y_label)}</text>"
        )
        return out


def _svg(width: int, height: int, title: str, body: Sequence[str]) -> str:
    # No xmlns: inline SVG in HTML needs none, and the page then holds no URL at all.
    return (
        f"<svg class='plot' viewBox='0 0 {width} {height}' width='{width}' height='{height}' "
        f"role='img' aria-label='{escape(title)}' {FONT}>"
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def _legend(items: Sequence[tuple[str, str, str]], x: float, y: float) -> list[str]:
    """(label, colour, shape) rows from (x, y), right-aligned boxes: shape is line/dot/dash."""
    out = []
    for i, (label, color, shape) in enumerate(items):
        yy = y + i * 16
        if shape == "dot":
            glyph = f"<circle cx='{_num(x + 8)}' cy='{_num(yy - 4)}' r='3.5' fill='{color}'/>"
        elif shape == "cross":
            glyph = (
                f"<text x='{_num(x + 8)}' y='{_num(yy)}' text-anchor='middle' font-size='12' "
                f"fill='{color}'>&#215;</text>"
            )
        else:
            dash = " stroke-dasharray='5 3'" if shape == "dash" else ""
            glyph = (
                f"<line x1='{_num(x)}' x2='{_num(x + 16)}' y1='{_num(yy - 4)}' "
                f"y2='{_num(yy - 4)}' stroke='{color}' stroke-width='2'{dash}/>"
            )
        out.append(
            glyph + f"<text x='{_num(x + 22)}' y='{_num(yy)}' font-size='11' fill='#222'>"
            f"{escape(label)}</text>"
        )
    return out


def _split_markers(markers: Sequence[Marker], data_max: float) -> tuple[list[Marker], list[Marker]]:
    on = [m for m in markers if m.value <= data_max * OFF_SCALE]
    return on, [m for m in markers if m not in on]


def cdf_chart(cdfs: Sequence[Cdf], markers: Sequence[Marker], title: str) -> str:
    """Empirical CDF of TTFT per request class, with the TTFT percentile objectives."""
    width, height = 620, 290
    data_max = max((c.xs[-1] for c in cdfs if c.xs), default=1.0)
    on, off = _split_markers(markers, data_max)
    x1 = max([data_max, *(m.value for m in on)]) * 1.05 * 1e3
    f = Frame(62, 16, width - 62 - 16, height - 16 - 58, 0.0, x1, 0.0, 1.0)
    body = f.axes("TTFT (ms)", "fraction of requests")
    for i, c in enumerate(cdfs):
        color = PALETTE[i % len(PALETTE)]
        pts = [(f.x(0), f.y(0))]
        prev_y = 0.0
        for x, y in zip(c.xs, c.ys, strict=True):
            px = f.x(x * 1e3)
            pts += [(px, f.y(prev_y)), (px, f.y(y))]
            prev_y = y
        pts.append((f.right, f.y(prev_y)))
        path = " ".join(f"{_num(a)},{_num(b)}" for a, b in pts)
        body.append(f"<polyline points='{path}' fill='none' stroke='{color}' stroke-width='2'/>")
    for m in on:
        x = f.x(m.value * 1e3)
        body.append(
            f"<line x1='{_num(x)}' x2='{_num(x)}' y1='{_num(f.top)}' y2='{_num(f.bottom)}' "
            f"stroke='{RED}' stroke-dasharray='5 3'/>"
        )
        if m.q is not None:
            y = f.y(m.q)
            # Left of the line, unless the label would then leave the plot.
            fits_left = x - 6 - _text_width(m.label) >= f.left
            tx, anchor = (x - 6, "end") if fits_left else (x + 6, "start")
            body.append(
                f"<circle cx='{_num(x)}' cy='{_num(y)}' r='4' fill='none' stroke='{RED}' "
                f"stroke-width='1.5'/><text x='{_num(tx)}' y='{_num(y + 16)}' "
                f"text-anchor='{anchor}' font-size='11' fill='{RED}'>{escape(m.label)}</text>"
            )
    legend = [
        (
            f"{c.request_class}: n={c.n}" + (f", {c.failed} failed" if c.failed else ""),
            PALETTE[i % len(PALETTE)],
            "line",
        )
        for i, c in enumerate(cdfs)
    ]
    if on:
        legend.append(("objective threshold", RED, "dash"))
    # Below the plot: inside it, a legend hides part of some class's curve.
    legend_y = f.bottom + 54
    body += _legend(legend, f.left, legend_y)
    height = int(legend_y + 16 * len(legend))
    if off:
        text = "off scale: " + "; ".join(f"{m.label}" for m in off)
        body.append(
            f"<text x='{_num(f.left)}' y='{height}' font-size='11' "
            f"fill='{RED}'>{escape(text)}</text>"
        )
        height += 18
    return _svg(width, height, title, body)


def timeline_chart(tl: Timeline, markers: Sequence[Marker], title: str) -> str:  # noqa: C901  (one SVG drawn top to bottom)
    """TTFT of each request at its send time (top) and requests in flight (bottom)."""
    width, height = 1180, 420
    classes = sorted({p.request_class for p in tl.points})
    colors = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(classes)}
    ttfts = [p.ttft_s for p in tl.points if p.ttft_s is not None]
    data_max = max(ttfts, default=0.001)
    on, off = _split_markers(markers, data_max)
    y1 = max([data_max, *(m.value for m in on)]) * 1.08 * 1e3
    x1 = max(tl.duration_s, 1e-3)
    top = Frame(62, 14, width - 62 - 200, 220, 0.0, x1, 0.0, y1)
    bottom_y1 = max(tl.peak, tl.max_num_seqs or 0, 1) * 1.15
    low = Frame(62, 262, top.width, 110, 0.0, x1, 0.0, bottom_y1)
    body = top.axes("", "TTFT (ms)", x_ticks=False)
    body += low.axes("time since the first request (s)", "in flight", y_integer=True)
    for m in on:
        y = top.y(m.value * 1e3)
        body.append(
            f"<line x1='{_num(top.left)}' x2='{_num(top.right)}' y1='{_num(y)}' "
            f"y2='{_num(y)}' stroke='{RED}' stroke-dasharray='5 3'/>"
            f"<text x='{_num(top.right - 4)}' y='{_num(y - 4)}' text-anchor='end' "
            f"font-size='11' fill='{RED}'>{escape(m.label)}</text>"
        )
    failed = 0
    for p in tl.points:
        x = top.x(p.t_s)
        if p.ttft_s is None:
            failed += 1
            body.append(
                f"<text x='{_num(x)}' y='{_num(top.top + 10)}' text-anchor='middle' "
                f"font-size='12' fill='{RED}'>&#215;</text>"
            )
            continue
        color = GREY if p.warmup else colors[p.request_class]
        body.append(
            f"<circle cx='{_num(x)}' cy='{_num(top.y(p.ttft_s * 1e3))}' r='2' "
            f"fill='{color}' fill-opacity='0.75'/>"
        )
    if tl.inflight_t:
        pts: list[tuple[float, float]] = []
        for i, (t, v) in enumerate(zip(tl.inflight_t, tl.inflight_max, strict=True)):
            t_next = tl.inflight_t[i + 1] if i + 1 < len(tl.inflight_t) else x1
            pts += [(low.x(t), low.y(v)), (low.x(t_next), low.y(v))]
        path = " ".join(f"{_num(a)},{_num(b)}" for a, b in pts)
        body.append(
            f"<polyline points='{path}' fill='none' stroke='{PALETTE[0]}' stroke-width='1.5'/>"
        )
    if tl.max_num_seqs:
        y = low.y(tl.max_num_seqs)
        body.append(
            f"<line x1='{_num(low.left)}' x2='{_num(low.right)}' y1='{_num(y)}' y2='{_num(y)}' "
            f"stroke='{RED}' stroke-dasharray='5 3'/>"
        )
    legend = [(f"TTFT, class {c}", colors[c], "dot") for c in classes]
    if any(p.warmup for p in tl.points):
        legend.append(("TTFT, warm-up request", GREY, "dot"))
    if failed:
        legend.append((f"failed request ({failed})", RED, "cross"))
    if on:
        legend.append(("TTFT objective", RED, "dash"))
    body += _legend(legend, top.right + 14, top.top + 12)
    low_legend = [(f"in flight (peak {tl.peak})", PALETTE[0], "line")]
    if tl.max_num_seqs:
        low_legend.append((f"max_num_seqs = {tl.max_num_seqs}", RED, "dash"))
    body += _legend(low_legend, low.right + 14, low.top + 12)
    notes = []
    if tl.every > 1:
        notes.append(f"every {tl.every}th request drawn")
    notes.append("in flight: most requests sent and not finished within each time step")
    if off:
        notes.append("off scale: " + "; ".join(m.label for m in off))
    body.append(
        f"<text x='{_num(low.left)}' y='{height - 4}' font-size='11' fill='#555'>"
        f"{escape('; '.join(notes))}</text>"
    )
    return _svg(width, height, title, body)


def stacked_bar(components: Sequence[Component], total: float, title: str) -> str:
    """The client's mean TTFT as a bar split into its parts (negative parts drawn as 0)."""
    width, height = 620, 92 + 18 * len(components)
    left, bar_w, bar_y, bar_h = 16, width - 32, 30, 30
    shown = [max(c.seconds, 0.0) for c in components]
    scale = bar_w / (sum(shown) or 1.0)
    body = [
        f"<text x='{left}' y='20' font-size='12' fill='#222'>"
        f"{escape(f'client TTFT mean = {total * 1e3:.2f} ms')}</text>"
    ]
    x = float(left)
    for i, (c, s) in enumerate(zip(components, shown, strict=True)):
        w = s * scale
        color = PALETTE[i % len(PALETTE)]
        body.append(
            f"<rect x='{_num(x)}' y='{bar_y}' width='{_num(w)}' height='{bar_h}' "
            f"fill='{color}'><title>{escape(c.name)}</title></rect>"
        )
        if w > 48:
            body.append(
                f"<text x='{_num(x + w / 2)}' y='{bar_y + 19}' text-anchor='middle' "
                f"font-size='11' fill='#fff'>{escape(f'{c.seconds * 1e3:.1f} ms')}</text>"
            )
        x += w
    for i, c in enumerate(components):
        y = bar_y + bar_h + 24 + 18 * i
        color = PALETTE[i % len(PALETTE)]
        share = c.seconds / total if total else math.nan
        body.append(
            f"<rect x='{left}' y='{y - 10}' width='12' height='12' fill='{color}'/>"
            f"<text x='{left + 18}' y='{y}' font-size='11' fill='#222'>"
            f"{escape(f'{c.name}: {c.seconds * 1e3:.2f} ms ({share:.0%})')}</text>"
        )
    return _svg(width, height, title, body)


def _steps(f: Frame, ts: Sequence[float], vs: Sequence[float], end: float) -> str:
    """A step line: each sampled value held until the next sample."""
    pts: list[tuple[float, float]] = []
    for i, (t, v) in enumerate(zip(ts, vs, strict=True)):
        t_next = ts[i + 1] if i + 1 < len(ts) else end
        pts += [(f.x(t), f.y(v)), (f.x(t_next), f.y(v))]
    return " ".join(f"{_num(a)},{_num(b)}" for a, b in pts)


def server_chart(s: ServerSeries, duration_s: float, title: str) -> str:
    """vLLM's running and waiting requests, KV-cache use and its own TTFT over time, on the
    time axis of the TTFT timeline (seconds since the first intended send)."""
    width, height = 1180, 458
    x1 = max(duration_s, s.t_s[-1], 1e-3)
    plot_w = width - 62 - 200
    queue_max = max([*s.running, *s.waiting, s.max_num_seqs or 0, 1]) * 1.15
    q = Frame(62, 14, plot_w, 150, 0.0, x1, 0.0, queue_max)
    kv = Frame(62, 184, plot_w, 90, 0.0, x1, 0.0, 100.0)
    ttft_max = max(s.ttft_mean_s, default=0.001) * 1e3 * 1.1
    tt = Frame(62, 294, plot_w, 110, 0.0, x1, 0.0, ttft_max)
    body = q.axes("", "requests", x_ticks=False, y_integer=True)
    body += kv.axes("", "KV cache %", x_ticks=False)
    body += tt.axes("time since the first request (s)", "vLLM TTFT (ms)")
    end = min(s.t_s[-1] + s.interval_s, x1)
    for values, color in ((s.running, PALETTE[0]), (s.waiting, PALETTE[1])):
        body.append(
            f"<polyline points='{_steps(q, s.t_s, values, end)}' fill='none' "
            f"stroke='{color}' stroke-width='1.8'/>"
        )
    if s.max_num_seqs:
        y = q.y(s.max_num_seqs)
        body.append(
            f"<line x1='{_num(q.left)}' x2='{_num(q.right)}' y1='{_num(y)}' y2='{_num(y)}' "
            f"stroke='{RED}' stroke-dasharray='5 3'/>"
        )
    usage = [u * 100 for u in s.kv_cache_usage]
    body.append(
        f"<polyline points='{_steps(kv, s.t_s, usage, end)}' fill='none' "
        f"stroke='{PALETTE[2]}' stroke-width='1.5'/>"
    )
    if s.ttft_t_s:
        pts = " ".join(
            f"{_num(tt.x(t))},{_num(tt.y(v * 1e3))}"
            for t, v in zip(s.ttft_t_s, s.ttft_mean_s, strict=True)
        )
        body.append(
            f"<polyline points='{pts}' fill='none' stroke='{PALETTE[3]}' stroke-width='1.5'/>"
        )
        body += [
            f"<circle cx='{_num(tt.x(t))}' cy='{_num(tt.y(v * 1e3))}' r='2' fill='{PALETTE[3]}'/>"
            for t, v in zip(s.ttft_t_s, s.ttft_mean_s, strict=True)
        ]
    legend = [
        (f"running (peak {max(s.running):.0f})", PALETTE[0], "line"),
        (f"waiting (peak {max(s.waiting):.0f})", PALETTE[1], "line"),
    ]
    if s.max_num_seqs:
        legend.append((f"max_num_seqs = {s.max_num_seqs}", RED, "dash"))
    body += _legend(legend, q.right + 14, q.top + 12)
    body += _legend(
        [
            (f"KV cache (peak {max(usage):.0f}%)", PALETTE[2], "line"),
            (f"preemptions: {s.preemptions}", GREY, "dot"),
        ],
        kv.right + 14,
        kv.top + 12,
    )
    body += _legend(
        [("mean per interval", PALETTE[3], "line")],
        tt.right + 14,
        tt.top + 12,
    )
    body.append(
        f"<text x='{_num(q.left)}' y='{height - 4}' font-size='11' fill='#555'>"
        f"{escape(f'vLLM /metrics sampled every {s.interval_s:.1f} s ({len(s.t_s)} samples)')}"
        "</text>"
    )
    return _svg(width, height, title, body)
