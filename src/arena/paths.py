"""Where Arena's own files are: its JSON Schemas (inside the package when it is installed from a
wheel, else the checkout's schemas/) and the checkout itself (arena-load's build, the tools
`make install` fetched into .tools/)."""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]  # in a checkout: the repository; installed: site-packages/..


def schema(name: str) -> Path:
    """schemas/NAME: the package's copy (a wheel carries them) or the checkout's."""
    packaged = Path(__file__).resolve().parent / "schemas" / name
    return packaged if packaged.exists() else CHECKOUT / "schemas" / name


def built(name: str, variable: str) -> Path | None:
    """One of Arena's own binaries (crates/NAME): $VARIABLE, else the checkout's build (make build),
    else NAME on PATH (cargo install); None where there is none to run."""
    import os
    import shutil

    given = os.environ.get(variable)
    if given:
        return Path(given)
    checkout = CHECKOUT / "target" / "release" / name
    if os.access(checkout, os.X_OK):
        return checkout
    found = shutil.which(name)
    return Path(found) if found else None
