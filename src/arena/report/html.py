"""The HTML report: a Report (report/data.py) rendered by Jinja2 from report/template.html as one
self-contained file (plotly.js inlined from the installed plotly package, nothing fetched). Every
user-given string is escaped: HTML text by the template's autoescaping, chart data as JSON inside a
script element with ``<``, ``>`` and ``&`` as \\u escapes, and chart labels escaped for plotly's own
pseudo-HTML. Colours and line styles come from the chart specifications (report/style.py).
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import time
from pathlib import Path
from urllib.parse import quote

from arena import __version__
from arena.report.charts import Chart
from arena.report.data import Report
from arena.report.export import chart_csv
from arena.report.style import HEATMAP, LINES

TEMPLATE = Path(__file__).with_name("template.html")


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@functools.lru_cache(maxsize=1)
def packed_plotly_js() -> str:
    """plotly.js gzipped, in base64: 2.0 MB of the page where it is 4.8 MB as shipped (the page
    unpacks it with the browser's own DecompressionStream before it draws)."""
    return base64.b64encode(gzip.compress(plotly_js().encode(), 6, mtime=0)).decode()


def _t(text: str) -> str:
    """A user-given string as plotly text: plotly reads a subset of HTML in labels, so escape it."""
    return html.escape(str(text), quote=False)


def _json_for_script(value) -> str:
    """JSON that cannot end its <script> element or open a comment, whatever the strings hold."""
    return (json.dumps(value, allow_nan=False, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _clean(values: list) -> list:
    """JSON has no NaN: missing values are null (plotly leaves a gap)."""
    return [None if v is None or (isinstance(v, float) and v != v) else v for v in values]


def figure(chart: Chart) -> dict:
    """Chart -> a plotly figure (data and layout); groups become a selector of visible traces."""
    layout = {
        "margin": {"l": 70, "r": 30, "t": 30, "b": 90}, "height": 460, "hovermode": "closest",
        "xaxis": {"title": {"text": _t(chart.x_label)}, "automargin": True},
        "yaxis": {"title": {"text": _t(chart.y_label)}, "automargin": True},
        "legend": {"orientation": "v"}, "paper_bgcolor": "white", "plot_bgcolor": "#fafafa",
    }
    if chart.kind == "heatmap":
        trace = {"type": "heatmap", "z": [_clean(row) for row in chart.z or []], "x": [_t(c) for c in chart.columns or []],
                 "y": [_t(r) for r in chart.rows or []], "colorscale": HEATMAP[0], "hoverongaps": False,
                 "colorbar": {"title": {"text": _t(chart.y2_label)}},
                 "texttemplate": "%{z:.3g}", "xgap": 2, "ygap": 2}
        if chart.z_range:
            trace["zmin"], trace["zmax"] = chart.z_range
        layout["xaxis"]["type"] = layout["yaxis"]["type"] = "category"
        return {"data": [trace], "layout": layout}
    for on, axis in ((chart.x_log, "xaxis"), (chart.y_log, "yaxis")):
        if on:  # labels at 1, 2 and 5 of each decade: a latency axis often spans less than one
            layout[axis].update(type="log", dtick="D2")
    if chart.x_ticks:
        layout["xaxis"].update(tickvals=list(chart.x_ticks), ticktext=list(chart.x_ticks.values()))
    if chart.kind in ("bar", "stack"):
        layout["barmode"] = "stack" if chart.kind == "stack" else "group"
        layout["xaxis"]["type"] = "category"
    if any(s.axis == "y2" for s in chart.series):
        layout["yaxis2"] = {"title": {"text": _t(chart.y2_label)}, "overlaying": "y", "side": "right",
                            "rangemode": "tozero", "automargin": True}
        layout["legend"].update(x=1.08)
    groups, first = chart.groups, chart.first_group
    data, owner = [], []  # owner: the group of each trace
    for s in chart.series:
        color = s.color
        visible = not groups or s.group == first
        common = {"name": _t(s.name), "legendgroup": _t(s.name), "visible": visible,
                  "yaxis": "y2" if s.axis == "y2" else "y"}
        if s.lo and any(v is not None for v in s.lo):  # the band: upper edge, then lower edge filled up to it
            data.append({**common, "type": "scatter", "x": _clean(s.x), "y": _clean(s.hi), "mode": "lines",
                         "line": {"width": 0, "color": color}, "showlegend": False, "hoverinfo": "skip"})
            data.append({**common, "type": "scatter", "x": _clean(s.x), "y": _clean(s.lo), "mode": "lines",
                         "line": {"width": 0, "color": color}, "fill": "tonexty", "fillcolor": color + "33",
                         "showlegend": False, "hoverinfo": "skip"})
            owner += [s.group, s.group]
        if s.style == "bar":
            data.append({**common, "type": "bar", "x": [_t(x) if isinstance(x, str) else x for x in s.x],
                         "y": _clean(s.y), "marker": {"color": color}})
        else:
            data.append({**common, "type": "scatter", "x": _clean(s.x), "y": _clean(s.y), "mode": "lines+markers",
                         "line": {"color": color, "dash": LINES[s.style][0]}, "marker": {"size": 6},
                         "connectgaps": False})
        owner.append(s.group)
    if groups:
        layout["updatemenus"] = [{
            "type": "dropdown", "x": 0, "xanchor": "left", "y": 1.12, "yanchor": "top", "showactive": True,
            "active": groups.index(first),
            "buttons": [{"label": _t(g), "method": "restyle", "args": [{"visible": [o == g for o in owner]}]}
                        for g in groups]}]
        layout["margin"]["t"] = 60
    return {"data": data, "layout": layout}


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["csv_uri"] = lambda chart: "data:text/csv;charset=utf-8," + quote(chart_csv(chart))
    return env


def render(report: Report) -> str:
    """The report's HTML page."""
    from markupsafe import Markup

    figures = {c.id: figure(c) for c in report.charts}
    return _environment().get_template(TEMPLATE.name).render(
        report=report, written=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), version=__version__,
        # already safe inside their script elements (plotly.js in base64; JSON with <, >, & escaped)
        plotly=Markup(packed_plotly_js()), figures=Markup(_json_for_script(figures)),
        answer_json=Markup(_json_for_script(report.answer_json)))
