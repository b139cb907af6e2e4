"""Arena: which app server and how many processes x threads serve a workload best, and why.

The data flow, in the package names (the layers are import-linter contracts in pyproject.toml):

    experiment file --plan/--> Experiment and its runs --runner--> servers/ (start, confine) +
    drivers/ (load) + probe (resources) --> results/store (typed runs) --results/aggregate-->
    cells --> model/ (calibrate, predict, simulate, recommend, findings) --> report/ (formats)

app/ is the engine API over all of it (one function per use case); cli/ parses arguments, calls
one app function and renders what it returns. The value types (results/: runs, cells, figures,
load results, resources; mix, clients, cpus) import no I/O.
"""

__version__ = "0.1.0"  # the package's version (pyproject.toml reads it here)
