"""Why a configuration is slow: the known pathologies behind a latency, named from the evidence a run
keeps (its timing, its Server-Timing, its cgroup's counters, its server's sockets), each with what it
cost (ms at p50 and p99, requests a second lost), how sure it is, the upstream reference and the
change that avoids it.

Pure: cells in, findings out. Each detector is a module of this package with its thresholds as data
(``THRESHOLDS``) and one function, ``detect(cell, cells)``: a Finding, an Unchecked (it could not
decide, and says why: it never guesses) or None (nothing of its kind). The analysis runs every
detector once over an experiment's cells (diagnose); show, the report, recommend and tune render what
it found.
"""
