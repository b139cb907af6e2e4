"""Results: the store (SQLite, typed runs decoded once: store.py, runs.py) and the one aggregation
of stored runs into cells, one per configuration x workload x load level (aggregate.py), that every
table, chart, ranking and model comparison reads."""
