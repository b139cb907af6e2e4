"""The output formats (registry.py) and the modules that register them, each a format: markdown.py
(a pull-request comment or a job summary), junit.py (JUnit XML for a CI's test report), run_rows.py
(arena export's csv and json), hdr.py (arena export's HdrHistogram hlog and hgrm)."""

from arena.report.formats import hdr, junit, markdown, run_rows  # noqa: F401  (each registers its formats)
from arena.report.formats.registry import (BUILT_IN, OWN, SCHEMAS, CompareView, ExportView, Format, ShowView, formats,
                                           many, register, render, schema, unregister, what)

__all__ = ["BUILT_IN", "OWN", "SCHEMAS", "CompareView", "ExportView", "Format", "ShowView", "formats", "many",
           "register", "render", "schema", "unregister", "what"]
