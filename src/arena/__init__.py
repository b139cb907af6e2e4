"""Arena: which app server and how many processes x threads serve a workload best, and why.

The data flow, in the package names:

    experiment file --plan/--> Experiment and its runs --runner--> servers/ (start, confine) +
    drivers/ (load) + probe (resources) --> results/store (typed runs) --results/aggregate-->
    cells --> report/ (the answer, tables, charts) and model/ (calibrate, predict, recommend)

app/ is the engine API over all of it (one function per use case); cli/ parses arguments, calls
one app function and renders what it returns.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("arena")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0+unknown"
