"""Runs the suite on every mutant and writes the kill matrix (JSON and Markdown).

cd tests && python -m helpers.kill_matrix [OUT.json]   # prints the Markdown matrix of reports/kill-matrix.md
"""

from __future__ import annotations

import json
import sys
import time

from gpt2_conformance import spec
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
from gpt2_conformance.run.runner import run_in_process
from helpers import mutants


def run_all() -> dict:
    out = {}
    for adapter in [NumpyAdapter, *mutants.ALL]:  # without shrinking: the same verdicts, sooner
        start = time.perf_counter()
        result = run_in_process(adapter, adapter.__name__, extra_args=("--gpt2c-no-shrink",))
        out[adapter.__name__] = {
            "failed": sorted(result.failed()),
            "error": result.error,
            "targets": sorted(getattr(adapter, "TARGETS", ())),
            "seconds": round(time.perf_counter() - start, 1),
        }
    return out


def markdown(matrix: dict) -> str:
    """Rows: mutants; columns: clause groups; a cell lists the clauses that killed it."""
    groups = list(spec.GROUPS)
    lines = ["| Mutant | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for name, row in matrix.items():
        cells = []
        for g in groups:
            ids = [c.split("-", 1)[1] for c in row["failed"] if spec.clause(c).group == g]
            cells.append("**" + ", ".join(ids) + "**" if ids else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    matrix = run_all()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(matrix, f, indent=1)
    print(markdown(matrix))
