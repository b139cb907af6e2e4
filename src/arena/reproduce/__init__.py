"""The classic studies reproduced: each published row beside the figures measured here and the
model's for the original conditions (compare.py); the published figures themselves are data
(results/published.py)."""
