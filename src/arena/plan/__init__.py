"""Experiment files (TOML) -> the experiment as values (experiment.py), read by parse.py (its keys
by reader.py) -> the plan of runs (expand.py).

First stage of Arena's data flow: experiment -> plan -> runner -> results (store, aggregate) ->
report and model."""
