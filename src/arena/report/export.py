"""Each chart of the report as files to paste into a README: its data as CSV and a picture (SVG or
PNG, drawn with matplotlib from the same Chart as the HTML report, in the same colours and line
styles: report/style.py). A chart with a selector (one group at a time) gets one picture per group.

Why a second renderer beside plotly: plotly draws static pictures only through Kaleido, which from
its version 1 drives a Chrome or Chromium browser it finds or downloads (a browser process per
export, hundreds of MB, and a download at run time where none is installed); matplotlib draws SVG
and PNG in this process. Both read the same Chart and the one palette, and a test compares each
series' colour in the pictures with the page's figures (tests/test_report.py)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from arena.report.charts import Chart
from arena.report.style import HEATMAP, LINES


def chart_csv(chart: Chart) -> str:
    """The chart's data, one row per point (long format)."""
    out = io.StringIO()
    w = csv.writer(out)
    if chart.kind == "heatmap":
        w.writerow([chart.y_label, chart.x_label, chart.y2_label])
        for r, row in zip(chart.rows or [], chart.z or []):
            for c, v in zip(chart.columns or [], row):
                w.writerow([r, c, "" if v is None else v])
        return out.getvalue()
    extra = [chart.y2_label] if any(s.axis == "y2" for s in chart.series) else []
    w.writerow(["group", "series", chart.x_label, chart.y_label, "interval_low", "interval_high"] + (["axis"] if extra else []))
    for s in chart.series:
        for i, (x, y) in enumerate(zip(s.x, s.y)):
            lo = s.lo[i] if s.lo and s.lo[i] is not None else ""
            hi = s.hi[i] if s.hi and s.hi[i] is not None else ""
            w.writerow([s.group, s.name, x, "" if y is None else y, lo, hi] + ([s.axis] if extra else []))
    return out.getvalue()




def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def draw(chart: Chart, group: str, path: Path) -> dict[str, str]:
    """Draw one group of ``chart`` into ``path``; returns each drawn series' colour by name, as
    matplotlib holds it (so a test can compare it with the HTML report's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    title = chart.title + (f" ({group})" if group else "")
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    try:
        if chart.kind == "heatmap":
            _heatmap(fig, ax, chart)
            drawn = {}
        elif chart.kind in ("bar", "stack"):
            drawn = _bars(ax, chart, group)
        else:
            drawn = _lines(ax, chart, group)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return drawn


def _heatmap(fig, ax, chart: Chart) -> None:
    import numpy as np

    z = np.array([[np.nan if v is None else v for v in row] for row in chart.z or []], dtype=float)
    lo, hi = chart.z_range or (None, None)
    im = ax.imshow(z, origin="lower", aspect="auto", cmap=HEATMAP[1], vmin=lo, vmax=hi)
    ax.set_xticks(range(len(chart.columns or [])), chart.columns or [])
    ax.set_yticks(range(len(chart.rows or [])), chart.rows or [])
    for (i, j), v in np.ndenumerate(z):
        if not np.isnan(v):
            ax.text(j, i, f"{v:.3g}", ha="center", va="center", color="white", fontsize=9)
    fig.colorbar(im, ax=ax, label=chart.y2_label)


def _bars(ax, chart: Chart, group: str) -> dict[str, str]:
    series = [s for s in chart.series if s.group == group]
    cats = list(dict.fromkeys(x for s in series for x in s.x))
    width = 0.8 / (1 if chart.kind == "stack" else max(1, len(series)))
    bottom = [0.0] * len(cats)
    drawn = {}
    for k, s in enumerate(series):
        ys = [0.0] * len(cats)
        for x, y in zip(s.x, s.y):
            ys[cats.index(x)] = y or 0.0
        offset = 0 if chart.kind == "stack" else (k - (len(series) - 1) / 2) * width
        bars = ax.bar([i + offset for i in range(len(cats))], ys, width, bottom=bottom if chart.kind == "stack" else None,
                      label=s.name, color=s.color)
        drawn[s.name] = _hex(bars.patches[0].get_facecolor()) if bars.patches else s.color
        if chart.kind == "stack":
            bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xticks(range(len(cats)), cats, rotation=30, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    return drawn


def _hex(rgba) -> str:
    from matplotlib.colors import to_hex

    return to_hex(rgba)


def _lines(ax, chart: Chart, group: str) -> dict[str, str]:
    series = [s for s in chart.series if s.group == group]
    drawn = {}
    right = ax.twinx() if any(s.axis == "y2" for s in series) else None
    if right is not None:
        right.set_ylabel(chart.y2_label)
    for s in series:
        target = right if s.axis == "y2" and right is not None else ax
        color = s.color
        pts = [(x, y) for x, y in zip(s.x, s.y) if y is not None]
        if pts:
            (line,) = target.plot(*zip(*pts), LINES[s.style][1], marker="o", markersize=3, color=color, label=s.name)
            drawn[s.name] = _hex(line.get_color())
        if s.lo and s.hi:
            band = [(x, lo, hi) for x, lo, hi in zip(s.x, s.lo, s.hi) if lo is not None and hi is not None]
            if band:
                xs, los, his = zip(*band)
                target.fill_between(xs, los, his, color=color, alpha=0.2, linewidth=0)
    from matplotlib.ticker import LogFormatter

    for on, axis, set_scale in ((chart.x_log, ax.xaxis, ax.set_xscale), (chart.y_log, ax.yaxis, ax.set_yscale)):
        if on:  # values between the powers of ten labelled too: a latency axis often spans less than a decade
            set_scale("log")
            axis.set_major_formatter(LogFormatter(labelOnlyBase=False))
            axis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    if chart.x_ticks:
        ax.set_xticks(list(chart.x_ticks), list(chart.x_ticks.values()), fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    if right is not None:
        h2, l2 = right.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if handles:
        ax.legend(handles, labels, fontsize=8)
    return drawn


def export(charts: list[Chart], directory: Path, fmt: str = "svg") -> list[Path]:
    """Write ``<chart>.csv`` and ``<chart>[-<group>].<fmt>`` for every chart; returns the files."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for chart in charts:
        path = directory / f"{chart.id}.csv"
        path.write_text(chart_csv(chart))
        written.append(path)
        for group in chart.groups or [""]:
            pic = directory / (f"{chart.id}-{_slug(group)}.{fmt}" if group else f"{chart.id}.{fmt}")
            draw(chart, group, pic)
            written.append(pic)
    return written
