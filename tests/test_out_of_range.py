"""reports/out-of-range.md is what the suite observes: what each backend did with each bad input.

The observation (runtime/observe.py) is checked against implementations whose answer is known by
construction (the kill matrix's mutants: a wrapped id, clamped and wrapped positions, zero and
NaN rows, float ids read as ints, a segfault), on both routes that judge (a child process per
run, and pytest in this process). The committed table is checked twice: it is exactly what
`gpt2-conformance out-of-range` makes of the committed reports (reports/runs), and the rows of
the backends installed here are what the suite observes in them now."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from gpt2_conformance import registry
from gpt2_conformance.merge import out_of_range
from gpt2_conformance.run import runner
from helpers import mutants

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "reports" / "out-of-range.md"
RUNS = ROOT / "reports" / "runs"
TESTS_DIR = os.path.dirname(__file__)
COLUMNS = [name for name, _ in out_of_range.PROBES]
PROBE_CASES = tuple(arg for _, probe in out_of_range.PROBES for arg in ("--gpt2c-case", f"test_bounds.py::{probe}"))


def _row(result) -> dict[str, str]:
    """column -> the cell out_of_range makes of a SuiteResult's report, as written to JSON."""
    (_, cells, _), *_ = out_of_range.rows([json.loads(json.dumps(result.to_dict()))])
    return dict(zip(COLUMNS, cells, strict=True))


def _committed_rows() -> dict[str, dict[str, str]]:
    """backend -> column -> cell, read back from the committed Markdown (bold removed)."""
    lines = COMMITTED.read_text(encoding="utf-8").splitlines()
    start = lines.index("| backend | " + " | ".join(COLUMNS) + " |")
    out = {}
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        label, *cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        out[label] = dict(zip(COLUMNS, cells, strict=True))
    return out


# mutant -> the cells its construction dictates (tests/helpers/mutants.py); the other columns raise
KNOWN = {
    "NegativeIdsWrap": {"id -1": "wrapped to row 50256", "id -100": "wrapped to row 50157"},
    # no checks at all: a negative past_length's first position indexes wpe from the end
    "ZeroRowsOutOfRange": {c: "zero rows" for c in COLUMNS[:5]} | {"past_length -1": "wrapped to row 1023"},
    "NaNRowsOutOfRange": {c: "NaN rows" for c in COLUMNS[:5]} | {"past_length -1": "wrapped to row 1023"},
    "ClampPositions": {"position 1024": "clamped to row 1023"},
    "WrapPositions": {"position 1024": "wrapped to row 0"},
    "FloatIdsAccepted": {"float ids": "accepted: row 0"},
    "NegativePastAccepted": {"past_length -1": "wrapped to row 1023"},
}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_each_outcome_is_observed_as_the_mutant_makes_it(name):
    """In this process (run_in_process): every probe's cell is the mutant's known answer, or the
    reference's raise where the mutant keeps its check."""
    result = runner.run_in_process(getattr(mutants, name), f"helpers.mutants:{name}", extra_args=PROBE_CASES)
    row = _row(result)
    for column in COLUMNS:
        assert row[column] == KNOWN[name].get(column, row[column]), (name, column, row)
        if column not in KNOWN[name]:
            assert row[column].startswith("raised ") or row[column] == "not claimed", (name, column, row)


def test_a_child_route_run_records_observations_and_the_signal_of_a_crash(monkeypatch):
    """`run --adapter` (a child process, its events file): the observation reaches the report,
    and the probe whose process died is told by its signal (a real SIGSEGV on id 2^31 - 1)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    spec = "helpers.crashing_adapters:SegfaultOnFarIds"
    row = _row(runner.run_backend(spec, adapter_spec=spec, extra_args=PROBE_CASES))
    assert row["id 2^31-1"] == "process aborted (SIGSEGV)", row
    assert row["id -1"] == "raised TokenIdOutOfRangeError (IndexError)", row
    assert row["position 1024"] == "raised PositionOutOfRangeError (IndexError)", row


REGENERATE = ["out-of-range", "--reports", "reports/runs", "--out", "reports/out-of-range.md"]  # the committed command


def _out_of_range(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_the_committed_table_is_what_the_command_makes_of_the_committed_reports(tmp_path):
    """The committed command, run in a copy of the checkout's layout (the committed reports and the
    docs linked in, the output a file of its own): the page it writes is the committed one, byte for
    byte, its header that command and its link the docs page."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "runs").symlink_to(RUNS)
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    done = _out_of_range(*REGENERATE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]  # 1: a probe of some report recorded nothing
    out = tmp_path / "reports" / "out-of-range.md"
    assert out.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8"), (
        f"reports/out-of-range.md is stale: gpt2-conformance {' '.join(REGENERATE)}"
    )


def test_the_header_is_the_command_run_and_the_docs_link_resolves_or_is_a_name(tmp_path):
    """Run outside a checkout, with other arguments: the header names that command as given (it
    named the committed one whatever was run), and the docs page, not there beside the output, is
    named, not linked to a page that does not resolve."""
    done = _out_of_range("out-of-range", "--reports", str(RUNS), "--out", "my table.md", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "wrote my table.md\n", done.stdout + done.stderr
    header = (tmp_path / "my table.md").read_text(encoding="utf-8").splitlines()[2]
    assert header.startswith(f"Generated by `gpt2-conformance out-of-range --reports {RUNS} --out 'my table.md'` "), (
        header
    )
    assert header.endswith("what each phrase means: docs/out-of-range.md in gpt2-conformance's sources."), header
    assert "](" not in header, header
    printed = _out_of_range("out-of-range", "--reports", str(RUNS), cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert f"Generated by `gpt2-conformance out-of-range --reports {RUNS}` from" in printed.stdout
    assert "](" not in printed.stdout.splitlines()[2]
    # beside a docs/ folder that holds the page (a checkout), the link is relative to the output file
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    done = _out_of_range("out-of-range", "--reports", str(RUNS), "--out", "deep/er/t.md", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "deep" / "er" / "t.md").read_text(encoding="utf-8").splitlines()[2]
    assert header.endswith("means: [docs/out-of-range.md](../../docs/out-of-range.md)."), header


def test_the_committed_table_has_a_row_for_every_registered_backend():
    rows = _committed_rows()
    assert set(registry.builtin()) <= set(rows), sorted(set(registry.builtin()) - set(rows))
    for label, cells in rows.items():
        assert out_of_range.NOT_RECORDED not in cells.values() and "not run" not in cells.values(), (label, cells)


# backends whose rows are checked live: cheap to build, and between them a raise of each kind
# and a silent answer (onnxruntime-hf wraps -1, as ONNX Gather's negative indices do)
LIVE = ("numpy", "torch", "hf-transformers", "onnxruntime-hf")


@pytest.mark.parametrize("backend", LIVE)
def test_the_committed_row_is_what_the_suite_observes_now(backend):
    if registry.missing_framework(backend):
        pytest.skip(f"{backend}: {registry.missing_framework(backend)} is not installed")
    observed = _row(runner.run_backend(backend, extra_args=PROBE_CASES))
    assert _committed_rows()[backend] == observed, (
        f"{backend}: the suite observes something else now; rerun it into reports/runs and regenerate "
        "reports/out-of-range.md (gpt2-conformance out-of-range --reports reports/runs --out reports/out-of-range.md)"
    )
