"""One palette and one line-style map for every renderer (HTML with plotly, SVG/PNG with
matplotlib): colours are decided once, when the report's charts are built (:func:`paint`), and
stored in each series, so a series has the same colour wherever it is drawn."""

from __future__ import annotations

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
# a series' style -> (plotly's dash name, matplotlib's line style)
LINES = {"line": ("solid", "-"), "dash": ("dash", "--"), "dot": ("dot", ":"), "bar": ("solid", "-")}
HEATMAP = ("Viridis", "viridis")  # (plotly's colour scale, matplotlib's colour map): the same scale


def paint(charts: list, first: list[str] = ()) -> None:
    """Give every series of ``charts`` its colour: one colour per colour key (a series' ``color``
    key, else its name) across the whole report, the keys in ``first`` (the configurations, in
    their order) first, so a configuration has one colour in every chart and every renderer."""
    keys = list(dict.fromkeys([*first, *(s.color_key or s.name for c in charts for s in c.series)]))
    for c in charts:
        for s in c.series:
            s.color = COLORS[keys.index(s.color_key or s.name) % len(COLORS)]
