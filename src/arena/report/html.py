"""The HTML report: one self-contained file (plotly.js inlined from the installed plotly package,
nothing fetched) with the charts of report/charts.py, the ranking, the comparison table and the
environment and method. Every user-given string is escaped: HTML text with ``html.escape``, chart
data as JSON inside a script element with ``<``, ``>`` and ``&`` as \\u escapes, and chart labels
escaped for plotly's own pseudo-HTML.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import time
from urllib.parse import quote

from arena import __version__
from arena.report.charts import Chart, Ranked, all_charts, model_section, nice, ranking
from arena.report.tables import comparison
from arena.store import StoredRun

SECTIONS = (
    ("throughput", "Throughput", "How many requests per second each configuration served at each load level."),
    ("latency", "Latency", "Percentiles against load, and the whole percentile spectrum at a chosen level."),
    ("heatmap", "Processes x threads", "Each server's grid at its highest load level."),
    ("decomposition", "Where the latency went",
     "The mean response time split into queueing before the app, waiting for the GIL/GVL or a core while "
     "computing (cpuwall - cpu), CPU, I/O, the rest of the app, and everything outside the app."),
    ("balance", "Balance across worker processes", "Who answered the requests (the X-Arena-Pid of each response)."),
    ("memory", "Memory", "PSS and USS summed over each server's processes, and throughput per GB."),
    ("errors", "Errors", "Transport errors by class and non-2xx responses by status."),
    ("time-series", "Time series", "Second by second, so stalls and warm-up effects show."),
    ("model", "Model: predicted vs measured",
     "The queueing model (arena.model) calibrated from each server's lowest-load runs, then asked for every "
     "configuration and load level; the error is (predicted - measured) / measured of throughput."),
)
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
DASH = {"line": "solid", "dash": "dash", "dot": "dot", "bar": "solid"}


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


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
                 "y": [_t(r) for r in chart.rows or []], "colorscale": "Viridis", "hoverongaps": False,
                 "colorbar": {"title": {"text": _t(chart.y2_label)}},
                 "texttemplate": "%{z:.3g}", "xgap": 2, "ygap": 2}
        layout["xaxis"]["type"] = layout["yaxis"]["type"] = "category"
        return {"data": [trace], "layout": layout}
    if chart.x_log:
        layout["xaxis"]["type"] = "log"
    if chart.y_log:
        layout["yaxis"]["type"] = "log"
    if chart.x_ticks:
        layout["xaxis"].update(tickvals=list(chart.x_ticks), ticktext=list(chart.x_ticks.values()))
    if chart.kind in ("bar", "stack"):
        layout["barmode"] = "stack" if chart.kind == "stack" else "group"
        layout["xaxis"]["type"] = "category"
    if any(s.axis == "y2" for s in chart.series):
        layout["yaxis2"] = {"title": {"text": _t(chart.y2_label)}, "overlaying": "y", "side": "right",
                            "rangemode": "tozero", "automargin": True}
        layout["legend"].update(x=1.08)
    groups = chart.groups
    data, owner = [], []  # owner: the group of each trace
    names = list(dict.fromkeys(s.color or s.name for s in chart.series))
    for s in chart.series:
        color = COLORS[names.index(s.color or s.name) % len(COLORS)]
        visible = not groups or s.group == groups[0]
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
                         "line": {"color": color, "dash": DASH[s.style]}, "marker": {"size": 6},
                         "connectgaps": False})
        owner.append(s.group)
    if groups:
        layout["updatemenus"] = [{
            "type": "dropdown", "x": 0, "xanchor": "left", "y": 1.12, "yanchor": "top", "showactive": True,
            "buttons": [{"label": _t(g), "method": "restyle", "args": [{"visible": [o == g for o in owner]}]}
                        for g in groups]}]
        layout["margin"]["t"] = 60
    return {"data": data, "layout": layout}


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
    w.writerow(["group", "series", chart.x_label, chart.y_label, "ci95_low", "ci95_high"] + (["axis"] if extra else []))
    for s in chart.series:
        for i, (x, y) in enumerate(zip(s.x, s.y)):
            lo = s.lo[i] if s.lo and s.lo[i] is not None else ""
            hi = s.hi[i] if s.hi and s.hi[i] is not None else ""
            w.writerow([s.group, s.name, x, "" if y is None else y, lo, hi] + ([s.axis] if extra else []))
    return out.getvalue()


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _ranking_rows(rows: list[Ranked]) -> list[list[str]]:
    e = html.escape
    return [[e(r.label), e(r.workload), e(r.level), f"{r.throughput:.1f}", nice(r.p99_ms), nice(r.pss_mib),
             f"{r.valid}/{r.runs}", e("; ".join(r.flags)) or "ok"] for r in rows]


def _chart_block(chart: Chart) -> str:
    e = html.escape
    data_uri = "data:text/csv;charset=utf-8," + quote(chart_csv(chart))
    return (f'<figure class="chart-box"><h3>{e(chart.title)}</h3>'
            f'<div class="chart" id="chart-{e(chart.id)}" data-points="{chart.points()}"></div>'
            f'<figcaption>{e(chart.note)} <a download="{e(chart.id)}.csv" href="{e(data_uri)}">data (CSV)</a>'
            f'</figcaption></figure>')


def _model_tables(points, calibrations, model_mape, fits) -> str:
    e = html.escape
    if not points and not calibrations:
        return ""
    predicted = [p for p in points if not p.calibration_run]
    summary = (f"<p><strong>Mean absolute percentage error of throughput: {model_mape:.1f}%</strong> over "
               f"{len(predicted)} predicted points (the calibration level excluded).</p>" if model_mape is not None
               else "<p>No point to predict beyond the calibration level.</p>")
    cal_rows = []
    for (server, workload), cal in calibrations.items():
        if isinstance(cal, str):
            cal_rows.append([e(server), e(workload), e(cal), "", "", "", ""])
        else:
            cal_rows.append([e(server), e(workload), e(str(cal.cpu_ms)), e(str(cal.io_ms)), e(str(cal.outside_ms)),
                             e(str(cal.gil_wait_ms or "-")), f"{cal.cores:g}"])
    rows = [[e(p.label), e(p.workload), e(f"c={int(p.level)}" if p.model == "closed" else f"{p.level:g} req/s"),
             f"{p.measured:.1f}", f"{p.predicted.throughput:.1f}",
             "calibration" if p.calibration_run else f"{100 * p.error:+.1f}%",
             nice(p.predicted.p99_ms), e(p.predicted.binding)] for p in points]
    usl_rows = []
    for label, workload, fit in fits:
        if isinstance(fit, str):
            usl_rows.append([e(label), e(workload), "-", "-", "-", "-", e(fit)])
            continue
        (slo, shi), (klo, khi), _ = fit.ci95
        peak = "none (no crosstalk)" if math.isinf(fit.peak_n) else f"{fit.peak_n:.1f} ({fit.peak_throughput:.1f} req/s)"
        usl_rows.append([e(label), e(workload), f"{fit.sigma:.4f} [{slo:.4f}, {shi:.4f}]",
                         f"{fit.kappa:.5f} [{klo:.5f}, {khi:.5f}]", f"{fit.lam:.2f}", e(peak), f"{fit.points} runs"])
    return (summary + "<h3>Calibration (lowest-load runs)</h3>"
            + _table(["server", "workload", "CPU ms/request", "I/O ms", "outside ms", "GIL/CPU wait ms", "cores"], cal_rows)
            + "<h3>Every point</h3>"
            + _table(["configuration", "workload", "level", "measured req/s", "predicted req/s", "error",
                      "predicted p99 ms", "what binds (model)"], rows, "model")
            + "<h3>Universal Scalability Law fits (throughput against concurrency, 95% intervals)</h3>"
            + _table(["configuration", "workload", "sigma (contention)", "kappa (crosstalk)", "lambda req/s",
                      "peak concurrency", "data"], usl_rows, "usl"))


def _definition_rows(d: dict, prefix: str = "") -> list[list[str]]:
    rows = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows += _definition_rows(v, key + ".")
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for i, item in enumerate(v):
                rows += _definition_rows(item, f"{key}[{i}].")
        else:
            rows.append([html.escape(key), html.escape(json.dumps(v) if not isinstance(v, str) else v)])
    return rows


def render(name: str, definition: dict, runs: list[StoredRun], *, p99_max_ms: float | None = None,
           memory_max_mib: float | None = None) -> tuple[str, list[Chart]]:
    """The report's HTML and its charts."""
    e = html.escape
    charts = all_charts(runs)
    model_charts, points, calibrations, model_mape, fits = model_section(runs)
    charts += model_charts
    per_server, overall = ranking(runs, p99_max_ms, memory_max_mib)
    limits = ", ".join(x for x in (f"p99 <= {p99_max_ms:g} ms" if p99_max_ms is not None else "",
                                   f"PSS <= {memory_max_mib:g} MiB" if memory_max_mib is not None else "") if x) or "none"
    head = ["configuration", "workload", "best level", "req/s (median)", "p99 ms", "PSS MiB", "valid/runs", "validity"]
    rank_html = (f"<p>Limits: {e(limits)}. For each configuration, the load level with the highest median throughput "
                 f"within the limits; invalid runs are left out of the medians and their flags listed.</p>"
                 f"<h3>Best configuration per server</h3>{_table(head, _ranking_rows(per_server), 'ranking')}"
                 f"<h3>Every configuration</h3>{_table(head, _ranking_rows(overall), 'ranking')}")
    if not overall:
        rank_html += "<p><strong>No configuration keeps within the limits.</strong></p>"

    # intervals of positive quantities are shown truncated at 0 (two repetitions give wide ones), as in `arena show`
    comp = [[e(r.label), e(r.level), f"{r.valid}/{r.runs}", nice(r.throughput, 4),
             e(f"{max(0.0, r.throughput_ci[0]):.1f} .. {r.throughput_ci[1]:.1f}") if r.throughput_ci else "-",
             nice(r.p50_us and r.p50_us / 1000), nice(r.p99_us and r.p99_us / 1000),
             e(f"{max(0.0, r.p99_ci[0]) / 1000:.3g} .. {r.p99_ci[1] / 1000:.3g}") if r.p99_ci else "-",
             nice(r.pss_bytes and r.pss_bytes / 2 ** 20), e("; ".join(r.problems)) or "ok"] for r in comparison(runs)]
    comp_html = _table(["configuration", "level", "valid/runs", "req/s", "95% CI", "p50 ms", "p99 ms", "p99 95% CI",
                        "PSS MiB", "validity"], comp, "comparison")

    sections = []
    for key, title, text in SECTIONS:
        mine = [c for c in charts if c.section == key]
        extra = _model_tables(points, calibrations, model_mape, fits) if key == "model" else ""
        if mine or extra:
            sections.append(f'<section><h2 id="{key}">{e(title)}</h2><p class="lead">{e(text)}</p>'
                            f'{"".join(_chart_block(c) for c in mine)}{extra}</section>')

    env = runs[0].json("environment") if runs else {}
    envs = {json.dumps(r.json("environment"), sort_keys=True) for r in runs}
    env_rows = [[e(k), e(json.dumps(v) if not isinstance(v, str) else v)] for k, v in env.items()]
    drivers = sorted({r.driver for r in runs})
    reused = sum(r.server_reused for r in runs)
    method = (f"<p>Load: {e(', '.join(drivers))}; {e(', '.join(sorted({r.model for r in runs})))} model; "
              f"measured for {e(str(definition.get('duration', definition.get('requests', '-'))))} after a warm-up of "
              f"{e(str(definition.get('warmup', '-')))} (discarded) at each level; {e(str(definition.get('repetitions', 1)))} "
              f"repetition(s), in a shuffled order. {reused} of {len(runs)} runs reused a server started for a lower "
              f"level of the same configuration (after their own warm-up). Server and load generator on separate CPUs "
              f"(server {e(str(env.get('server_cpus', '-')))}, load {e(str(env.get('load_cpus', '-')))}). "
              f"Percentiles: nearest rank. A run is invalid when the generator saturated, errors passed the threshold, "
              f"throughput drifted between its halves beyond noise, or a server process died.</p>"
              + ("" if len(envs) <= 1 else f"<p><strong>The runs ran in {len(envs)} different environments; the first is shown.</strong></p>"))
    valid = sum(r.valid for r in runs)
    figures = {c.id: figure(c) for c in charts}
    nav = "".join(f'<a href="#{k}">{e(t)}</a>' for k, t, _ in SECTIONS if any(c.section == k for c in charts)
                  or k == "model" and (points or calibrations))
    js = plotly_js()
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Arena report: {e(name)}</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 0 24px 48px; color: #222; }}
h1 {{ margin-bottom: 0; }} h2 {{ border-bottom: 1px solid #ddd; padding-top: 12px; }}
nav a {{ margin-right: 14px; }} .lead {{ color: #555; }}
table {{ border-collapse: collapse; margin: 8px 0 18px; font-size: 13px; }}
th, td {{ border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }} td:nth-child(n+3) {{ font-variant-numeric: tabular-nums; }}
figure {{ margin: 12px 0 28px; }} figcaption {{ color: #555; font-size: 13px; }}
.chart {{ width: 100%; min-height: 460px; }}
</style></head><body>
<h1>Arena report: {e(name)}</h1>
<p class="lead">{e(definition.get("description", ""))}</p>
<p>{len(runs)} runs ({valid} valid) of {len({r.label for r in runs})} configurations; written {e(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))} by Arena {e(__version__)}.</p>
<nav><a href="#ranking">Ranking</a><a href="#table">Table</a>{nav}<a href="#environment">Environment and method</a></nav>
<section><h2 id="ranking">Ranking</h2>{rank_html}</section>
<section><h2 id="table">Comparison table</h2><p class="lead">Per configuration and load level: medians of the valid repetitions and their 95% confidence intervals (t).</p>{comp_html}</section>
{"".join(sections)}
<section><h2 id="environment">Environment and method</h2>{method}
<h3>Machine and versions</h3>{_table(["item", "value"], env_rows)}
<h3>Experiment definition</h3>{_table(["key", "value"], _definition_rows(definition))}</section>
<script>{js}</script>
<script type="application/json" id="arena-figures">{_json_for_script(figures)}</script>
<script>
(function () {{
  var figures = JSON.parse(document.getElementById("arena-figures").textContent);
  Object.keys(figures).forEach(function (id) {{
    try {{  // one chart's failure must not hide the others; it is still reported
      Plotly.newPlot(document.getElementById("chart-" + id), figures[id].data, figures[id].layout,
        {{responsive: true, displaylogo: false, toImageButtonOptions: {{format: "svg", filename: id}}}});
    }} catch (err) {{
      console.error("chart " + id + ": " + err);
    }}
  }});
}})();
</script>
</body></html>
"""
    return page, charts
