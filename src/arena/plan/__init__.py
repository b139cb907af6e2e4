"""Experiment files (TOML) -> a validated, typed Experiment (experiment.py, its keys read by
reader.py) -> the plan of runs (expand.py).

First stage of Arena's data flow: experiment -> plan -> runner -> results (store, aggregate) ->
report and model."""
