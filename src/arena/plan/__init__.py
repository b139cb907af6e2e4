"""Experiment files (TOML) -> a validated, typed Experiment -> the plan of runs (experiment.py).

First stage of Arena's data flow: experiment -> plan -> runner -> results (store, aggregate) ->
report and model."""
