"""Load drivers: each runs a load generator and returns one LoadResult type (drivers/result.py)."""
