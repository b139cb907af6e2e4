"""How results are shown: terminal summaries and tables (and, later, the HTML report)."""
