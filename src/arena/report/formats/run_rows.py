"""An experiment's runs as rows: ``arena export``'s csv (one flat row per run) and json (every run
whole, as stored). Formats only: the runs come in the view."""

from __future__ import annotations

import csv
import io
import json
import shlex
from datetime import datetime, timezone

from arena.report.formats.registry import ExportView, Format, register
from arena.results.store import RUN_COLUMNS


def _csv_value(column: str, v):
    """A run's value as a CSV cell: documents (the flags) as JSON, times as ISO 8601
    UTC, a whole level as a whole number (16, not 16.0)."""
    if column == "started_at" and v is not None:
        return datetime.fromtimestamp(v, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v)
    if column == "level" and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


SPREAD = ("launch", "topology")  # the documents whose every value is a CSV column of its own


def _spread(prefix: str, v, out: dict) -> None:
    """A document's values as dotted columns (launch.env.RACK_ENV, launch.settings.preload): the
    command line as one shell line (launch.argv), other lists as JSON."""
    if isinstance(v, dict):
        for k, x in v.items():
            _spread(f"{prefix}.{k}", x, out)
    elif isinstance(v, (list, tuple)):
        out[prefix] = shlex.join(map(str, v)) if prefix == "launch.argv" else json.dumps(v)
    else:
        out[prefix] = json.dumps(v) if isinstance(v, bool) else v


def _json(v: ExportView) -> dict[str, str]:
    """Every run whole, as stored; a failure its own fields, "failed": true, no figures."""
    runs, failures = v.read("whole")
    return {f"{v.name}.json": json.dumps([r.to_json() for r in runs] + [{**f.to_json(), "failed": True}
                                                                          for f in failures], indent=1)}


def _csv(v: ExportView) -> dict[str, str]:
    """One flat row per run: the launch and topology spread over columns of their own, the other
    documents as JSON, its start as an ISO 8601 time."""
    name = v.name
    runs, failures = v.read("none")
    flat = [c for c in RUN_COLUMNS if c not in ("load", "resources", "environment", "services", *SPREAD)]
    flat.insert(flat.index("cpu_s") + 1, "throttled_ms")  # Run.throttled_ms: a run's figure, not a column
    rows = [r.to_json() for r in runs]
    rows += [{**f.to_json(), "started_at": f.failed_at, "valid": 0, "flags": [f.reason], "flag_kinds": ["the run failed"]} for f in failures]
    spread = []  # a failure: invalid, its reason the flag, no figures
    for d in rows:
        cells: dict = {}
        for doc in SPREAD:
            _spread(doc, d.get(doc) or {}, cells)
        spread.append(cells)
    extra = sorted({k for cells in spread for k in cells})
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["experiment", *flat, *extra])
    for d, cells in zip(rows, spread):
        w.writerow([name, *(_csv_value(c, d.get(c)) for c in flat), *(cells.get(k) for k in extra)])
    return {f"{name}.csv": buf.getvalue()}


register(Format("csv", "one row per run", {"export": _csv}))
register(Format("json", "every run whole", {"export": _json}))
