"""What a run writes and prints, from made-up rounds through the real summary: ranks, ties and
intervals in the console table and bench.md; bench.json in pytest-benchmark's layout (its own
loader and compare CLI read it) with "ranking"; MODEL ERROR and NOT A VERDICT; the plot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpt2_conformance.bench import benchmark_json, report
from gpt2_conformance.bench.plot import RatioPlot
from helpers.bench_results import BAR_BYTES, META, table


def test_rows_are_ranked_fastest_first_with_ties_and_intervals():
    t = table({"numpy": 2e-3, "torch": 1e-3, "jax": 1.0e-3, "tf": 4e-3}, limit=0.8e-3)
    got = {r["label"]: r for r in t["rows"]}
    assert t["rows"][0]["rank"] == 1 and t["rows"][0]["label"] in ("torch", "jax")
    assert [r["rank"] for r in t["rows"]] == [1, "tie", 3, 4]
    assert [r["label"] for r in t["rows"]][2:] == ["numpy", "tf"]
    assert got["numpy"]["ci_low"] < got["numpy"]["ratio"] < got["numpy"]["ci_high"]
    assert 1.9 < got["numpy"]["ratio"] < 2.1
    assert got["numpy"]["pct_of_limit"] == pytest.approx(40, rel=0.05)
    assert got["numpy"]["bytes_moved"] == BAR_BYTES


def test_the_console_table_and_markdown_say_tie_rank_and_interval():
    t = table({"numpy": 2e-3, "torch": 1e-3, "jax": 1.0e-3}, limit=0.8e-3)
    text = report.ConsoleTable().render([t], META)
    assert "tie" in text and "2.0" in text and "[" in text and "% [" in text, text
    md = report.MarkdownReport().render([t], META)
    assert f"## {t['group']}" in md and "| rank | implementation |" in md and "| tie |" in md, md


def test_a_row_faster_than_a_stream_of_its_own_bytes_is_a_model_error():
    t = table({"numpy": 1e-3}, limit=2e-3)
    row = t["rows"][0]
    assert row["model_error"].startswith("200%") and "MODEL ERROR 200%" in report.pct_text(row)
    assert row["pct_of_limit"] is None, "a model error is a flag, never a % shown as a result"


def test_a_busy_machine_makes_it_not_a_verdict():
    text = report.ConsoleTable().render([table({"numpy": 1e-3})], dict(META, other_load_cores=0.9))
    assert "NOT A VERDICT: other processes kept 0.90 cores busy" in text


def test_a_failed_row_is_listed_with_its_error_after_the_ranked_ones():
    t = table({"numpy": 1e-3, "torch": 1e-3}, errors=("torch",))
    assert [r["label"] for r in t["rows"]] == ["numpy", "torch"] and t["rows"][1]["error"] == "torch failed"
    assert "  ERROR  torch suite: torch failed" in report.ConsoleTable().render([t], META)


def test_json_has_the_ranking_and_loads_with_pytest_benchmarks_own_loader(tmp_path):
    from pytest_benchmark.storage.file import FileStorage

    class Logger:  # the loader reports a file it cannot read as a warning and skips it
        warnings: list = []

        def warning(self, text, *args, **kwargs):
            self.warnings.append(text)

    t = table({"numpy": 2e-3, "torch": 1e-3}, limit=0.8e-3)
    path = benchmark_json.BenchmarkJSON().write([t], META, str(tmp_path / "bench.json"))
    data = json.loads(open(path).read())
    ranking = data["ranking"][t["group"]]
    assert [r["backend"] for r in ranking] == ["torch", "numpy"] and ranking[0]["rank"] == 1
    assert set(benchmark_json.RANKING) <= set(ranking[1]) and ranking[1]["ci_low"] > 1
    b = data["benchmarks"][0]
    assert b["fullname"].startswith("tests/benchmarks/test_embedding_speed.py::test_forward_prefill[")
    logger = Logger()
    loaded = list(FileStorage(str(tmp_path), logger=logger, default_machine_id="x").load_benchmarks(path))
    assert logger.warnings == [] and len(loaded) == 2 and all(b["median"] > 0 for b in loaded)
    cli = [sys.executable, "-c", "import sys; from pytest_benchmark.cli import main; sys.exit(main())"]
    done = subprocess.run(
        [*cli, "compare", path, "--columns=median,iqr"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "test_forward_prefill[numpy-suite-B8-T1024-d768]" in done.stdout, done.stderr


def test_the_plot_draws_every_ranked_row(tmp_path):
    pytest.importorskip("matplotlib")
    path = RatioPlot().write([table({"numpy": 2e-3, "torch": 1e-3})], META, str(tmp_path / "bench.png"))
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert RatioPlot().write([table({"numpy": 1e-3}, errors=("numpy",))], META, str(tmp_path / "none.png")) is None
