"""The output formats (registry.py) and the modules that register them, each a format: markdown.py
(a pull-request comment or a job summary), junit.py (JUnit XML for a CI's test report)."""

from arena.report.formats import junit, markdown  # noqa: F401  (each registers its format as it is imported)
from arena.report.formats.registry import (BUILT_IN, SCHEMAS, CompareView, Format, ShowView, formats, register,
                                           render, schema, unregister, what)

__all__ = ["BUILT_IN", "SCHEMAS", "CompareView", "Format", "ShowView", "formats", "register", "render", "schema",
           "unregister", "what"]
