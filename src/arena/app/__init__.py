"""The engine API: one plain function per use case, typed arguments in, data out. The CLI
(arena/cli/) parses arguments, calls one of these and renders what it returns; tests call them
directly.

- servers.py: the catalog (``servers``), one server in the foreground (``serve``)
- check.py: conformance of every server and app (``check``)
- load.py: load at a URL with arena-load (``load``)
- run.py: plan and run an experiment file into a store (``plan_file``, ``run_file``): where its
  runs are made (here, the cluster's server host, or a capacity search)
- store.py: read a store back (``open_store``, ``results``, ``experiments``, ``export``,
  ``import_rescued``)
- report.py: the report of an experiment (``build_report``, ``write_report``, ``export_charts``)
- model.py: the model (``predict``, ``recommend``, ``verify``)
"""
