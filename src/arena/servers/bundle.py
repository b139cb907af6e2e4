"""A Rack app's own bundle: where the app's directory has a Gemfile, its server runs under
``bundle exec`` with the bundle's gems (Debian's bundler and the gems Debian packages), and the
version recorded is the one its Gemfile.lock names, not Arena's copy.

Nothing is written into the app's directory: the lock must exist (``bundle lock --local`` makes one
from the installed gems), is checked with ``bundle check --dry-run``, and the server runs with
BUNDLE_FROZEN, so bundler never rewrites it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from arena.errors import ArenaError

# Bundler's own lockfile parser: the version of gem ARGV[1] in lock ARGV[0], or nothing.
_LOCKED_VERSION = ("l = Bundler::LockfileParser.new(Bundler.read_file(ARGV[0])); "
                   "s = l.specs.find { |x| x.name == ARGV[1] }; print s.version if s")


@dataclass(frozen=True)
class Bundle:
    gemfile: Path
    lock: Path

    def env(self) -> dict[str, str]:
        """What ``bundle exec`` runs with: this Gemfile, and its lock never rewritten."""
        return {"BUNDLE_GEMFILE": str(self.gemfile), "BUNDLE_FROZEN": "true"}

    def version(self, gem: str) -> str:
        """The version of ``gem`` in the lock; an error when the bundle does not hold it (``bundle
        exec`` could not load it). Asked once per lock as it stands (an experiment asks at every start)."""
        return _locked_version(self, gem, self.lock.stat().st_mtime_ns)


@lru_cache(maxsize=None)
def _locked_version(bundle: Bundle, gem: str, stamp: int) -> str:
    """Bundle.version for the lock as it was at ``stamp`` (its mtime): one ruby per lock and gem."""
    out = _run(["ruby", "-rbundler", "-e", _LOCKED_VERSION, str(bundle.lock), gem], bundle)
    if out.returncode != 0:
        raise ArenaError(f"--app: {bundle.lock}: bundler cannot read it: {_first_line(out)}")
    if not out.stdout.strip():
        raise ArenaError(f"--app: {bundle.lock} does not list {gem}: a server runs under bundle exec only from the "
                         f"app's bundle (add gem \"{gem}\" to its Gemfile, then bundle lock --local)")
    return out.stdout.strip()


def bundle_of(chdir: str | Path) -> Bundle | None:
    """The bundle of the app in ``chdir``: None without a Gemfile (Arena's servers run it); an error
    when there is a Gemfile but no lock, no bundler, or gems of the lock that are not installed."""
    gemfile = Path(chdir).resolve() / "Gemfile"
    if not gemfile.is_file():
        return None
    if shutil.which("bundle") is None:
        raise ArenaError(f"--app: {gemfile}: the app has a Gemfile and bundler is not installed "
                         "(apt-get install -y ruby-bundler)")
    lock = gemfile.with_name("Gemfile.lock")
    if not lock.is_file():
        raise ArenaError(f"--app: {gemfile} has no Gemfile.lock (Arena writes nothing into the app's directory): "
                         f"make one from the installed gems with: cd {chdir} && bundle lock --local")
    bundle = Bundle(gemfile, lock)
    _checked(bundle, lock.stat().st_mtime_ns)
    return bundle


@lru_cache(maxsize=None)
def _checked(bundle: Bundle, stamp: int) -> None:
    """``bundle check`` of the lock as it was at ``stamp`` (its mtime): once, not at every start (a
    failure is not remembered: the next start asks again)."""
    out = _run(["bundle", "check", "--dry-run"], bundle)
    if out.returncode != 0:
        raise ArenaError(f"--app: {bundle.lock}: its gems are not all installed (bundle check: {_first_line(out, 3)}); "
                         "install them from Debian's packages (ruby-NAME)")


def _run(argv: list[str], bundle: Bundle) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                              cwd=bundle.gemfile.parent, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                              "HOME": os.environ.get("HOME", "/"), **bundle.env()})
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ArenaError(f"--app: {bundle.gemfile}: {argv[0]} failed: {e}") from None


def _first_line(out: subprocess.CompletedProcess, lines: int = 1) -> str:
    text = [line.strip() for line in (out.stderr + out.stdout).splitlines()
            if line.strip() and not line.startswith("[DEPRECATED]")]  # bundler's advice, not the failure
    return " ".join(text[:lines]) or f"exit {out.returncode}"
