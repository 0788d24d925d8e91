"""`gpt2-conformance constraints`: print the pinned constraints file this installed suite ships.

The repository's constraints.txt (one known-good set of pins for the frameworks) travels in the
wheel as package data (conformance/constraints.txt is a link to it, followed at build time), so
an environment that installs the suite by name, and not from a checkout, can still install
under the same pins:

    pip install --no-deps "gpt2-conformance @ git+https://github.com/OWNER/gpt2-conformance@v0.1.0"
    gpt2-conformance constraints > constraints.txt
    pip install -c constraints.txt "gpt2-conformance[torch] @ git+https://github.com/OWNER/gpt2-conformance@v0.1.0"

Imports nothing beyond the standard library, so it runs before the suite's dependencies are
installed (the first line above installs none of them) as `python -m
gpt2_conformance.run.constraints_command`, which prints the same; the `gpt2-conformance` entry
point loads every command's module, and some need numpy."""

from __future__ import annotations

import sys
from importlib import resources

RESOURCE = "constraints.txt"  # in the gpt2_conformance package


def add_parser(subparsers) -> None:
    subparsers.add_parser(
        "constraints",
        help="print the pinned constraints file the suite ships (for `pip install -c` outside a checkout)",
    )


def text() -> str:
    return resources.files("gpt2_conformance").joinpath(RESOURCE).read_text(encoding="utf-8")


def run(args) -> int:
    sys.stdout.write(text())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":  # before the dependencies are installed (see above)
    sys.exit(run(None))
