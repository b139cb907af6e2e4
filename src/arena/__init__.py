"""Arena: which app server and how many processes x threads serve a workload best, and why."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("arena")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0+unknown"
