"""The names conformance/bench/command.py and tests/helpers/reports.py still import from here; the outputs themselves
live apart, one module each:

    verdict.py         the rows (workload_rows, verdict_rows) and the bars, the decode step
    table.py           the console table and bench.md (ConsoleTable, MarkdownReport)
    benchmark_json.py  bench.json in pytest-benchmark's layout (BenchmarkJSON)
    plot.py            bench.png and bench-decode-step.png (LimitPlot, DecodeStepPlot; matplotlib lazily)
    files.py           write_all: every file on its own, bench-results.json first
"""

from __future__ import annotations

from gpt2_conformance.bench.benchmark_json import BenchmarkJSON
from gpt2_conformance.bench.files import write_all
from gpt2_conformance.bench.table import ConsoleTable
from gpt2_conformance.bench.verdict import verdict_rows
from gpt2_conformance.bench.verdict import workload_rows as rows

__all__ = ["benchmark_json", "console", "rows", "verdict_rows", "write_all"]


def console(results: list[dict], rows: list[dict], meta: dict | None = None) -> str:
    return ConsoleTable().render(results, rows, meta)


def benchmark_json(results: list[dict], rows: list[dict], meta: dict) -> dict:
    return BenchmarkJSON().render(results, rows, meta)
