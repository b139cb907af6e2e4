"""A user's own traffic: access logs read (logs.py) and grouped into a request mix (templates.py)."""
