"""Every file a bench run writes, each on its own (write_all): the raw results first
(bench-results.json: the children's figures, standard library only), then bench.json, the
decode-step PNG, bench.md (which links that PNG where it was written) and bench.png. One that
fails (a missing optional package, a full disk) costs that file and one line, never the
others."""

from __future__ import annotations

import json
import os

from gpt2_conformance.bench.benchmark_json import BenchmarkJSON
from gpt2_conformance.bench.plot import DecodeStepPlot, LimitPlot
from gpt2_conformance.bench.table import MarkdownReport


class RawResults:
    """bench-results.json: the run's meta and the children's results as they returned them."""

    filename = "bench-results.json"

    def render(self, results: list[dict], meta: dict) -> str:
        return json.dumps({"meta": meta, "results": results}, indent=1, default=str)

    def write(self, results: list[dict], meta: dict, path: str) -> str:
        content = self.render(results, meta)  # made before the file is opened: no half-written file
        with open(path, "w") as f:
            f.write(content)
        return path


def write_all(results: list[dict], rows: list[dict], meta: dict, out_dir: str, say=print) -> dict[str, str]:
    """Writes every output on its own: {kind: path} of those written. One that fails (a missing
    optional package, a full disk) costs that output and one line through say(), never the
    others; the raw results (bench-results.json: the children's figures) go first, with no
    dependency beyond the standard library."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}

    def attempt(kind: str, filename: str, write) -> None:
        path = os.path.join(out_dir, filename)
        try:
            if write(path) is not None:
                paths[kind] = path
        except ImportError as exc:
            say(f"bench: no {filename}: {exc} (pip install matplotlib for the plots); the other outputs are written")
        except Exception as exc:  # noqa: BLE001 - one output's failure never costs the others
            say(f"bench: no {filename}: {type(exc).__name__}: {exc}; the other outputs are written")

    attempt("raw", RawResults.filename, lambda p: RawResults().write(results, meta, p))
    attempt("json", BenchmarkJSON.filename, lambda p: BenchmarkJSON().write(results, rows, meta, p))
    attempt("step_png", DecodeStepPlot.filename, lambda p: DecodeStepPlot().write(rows, p))
    if "step_png" in paths:
        meta = dict(meta, step_png=os.path.basename(paths["step_png"]))
    attempt("markdown", MarkdownReport.filename, lambda p: MarkdownReport().write(results, rows, meta, p))
    attempt("png", LimitPlot.filename, lambda p: LimitPlot().write(rows, p))
    return paths
