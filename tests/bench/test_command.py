"""`gpt2-conformance bench` as a user runs it (its own process, tiny rounds: the plumbing, not the
speed): a ranking written to every output, the gate passing an implementation against itself and
failing one doing twice the work, bad command lines refused in one line before any worker starts,
a run that timed nothing, and --compare as advice, never a gate."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from gpt2_conformance.bench import gate
from helpers import bench_adapters
from helpers.bench_results import table

TESTS = pathlib.Path(bench_adapters.__file__).resolve().parent.parent


def bench(tmp_path, *args, timeout=600):
    """The command in its own process, from tmp_path, with tests/ on the path for the helper adapters."""
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    done = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "bench", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_ranking_is_written_to_every_output(tmp_path):
    code, out, err = bench(tmp_path, "--backend", "numpy", "--quick", "--rounds", "6", "--out-dir", "out")
    assert code == 0, out + err
    data = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert set(data["ranking"]) == {"step_decode B1-T1-d768-past512", "forward_prefill B8-T1024-d768"}
    for rows in data["ranking"].values():
        assert [(r["backend"], r["mode"], r["rank"]) for r in rows] == [("numpy", "suite", 1)]
    assert "| 1 | numpy suite | 1.00x |" in (tmp_path / "out" / "bench.md").read_text()
    assert (tmp_path / "out" / "bench.png").exists() and "% [" in out


def test_the_gate_passes_an_implementation_timed_against_itself(tmp_path):
    code, out, err = bench(
        tmp_path,
        "--adapter",
        "numpy",
        "--against",
        "numpy",
        "--workload",
        "forward_prefill",
        "--fail-above",
        "10",
        "--out-dir",
        "out",
    )
    assert code == 0 and "gate forward_prefill B8-T1024-d768: ok: new numpy takes" in out, out + err


def test_the_gate_fails_an_implementation_doing_twice_the_work(tmp_path):
    code, out, err = bench(
        tmp_path,
        "--adapter",
        bench_adapters.DOUBLED_NUMPY_SPEC,
        "--against",
        bench_adapters.PLAIN_NUMPY_SPEC,
        "--workload",
        "forward_prefill",
        "--fail-above",
        "10",
        "--out-dir",
        "out",
    )
    assert code == 1 and "gate forward_prefill B8-T1024-d768: SLOWER: new" in out, out + err
    assert "above 1.10 with 95% confidence" in out


def test_the_gate_judges_on_the_intervals_low_end():
    slower = table({"new": 2.0e-3, "base": 1e-3})
    assert gate.judge([slower], "new", "base", 10)[0] == 1
    assert gate.judge([slower], "new", "base", 150)[0] == 0, "2x is within a 150% threshold"
    assert gate.judge([table({"new": 1e-3, "base": 1e-3})], "new", "base", 10)[0] == 0
    code, text = gate.judge([table({"new": 1e-3, "base": 1e-3}, errors=("new",))], "new", "base", 10)
    assert code == 1 and "NOT JUDGED (new: new failed)" in text
    assert gate.judge([], "new", "base", 10) == (1, "gate: NOT JUDGED (no workload was timed)")


@pytest.mark.parametrize(
    "options,says",
    [
        (["--adapter", "numpy"], "--adapter and --against go together"),
        (["--against", "numpy"], "--adapter and --against go together"),
        (["--adapter", "numpy", "--against", "numpy", "--backend", "torch"], "--backend does not apply to the gate"),
        (["--against-python", "/bin/sh"], "--against-python needs --against"),
        (
            ["--adapter", "numpy", "--against", "numpy", "--against-python", "/nope/python"],
            "--against-python /nope/python: not an executable interpreter",
        ),
        (["--processes", "0"], "--processes 0: must be >= 1"),
        (["--quick", "--rounds", "5"], "--rounds 5: a ratio's interval needs at least 3 rounds per process"),
        (["--fail-above", "-1"], "--fail-above -1.0: must be >= 0"),
        (["--quick", "--sizes", "768"], "--sizes does not apply with --quick"),
        (["--backend", "nope"], "--backend 'nope': unknown backend"),
        (["--adapter", "nope", "--against", "numpy"], "'nope': unknown backend"),
        (["--adapter", "no_such_module:Factory", "--against", "numpy"], "no_such_module"),
        (["--compare", "missing.json"], "--compare missing.json: no such file"),
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2_before_any_worker(tmp_path, options, says):
    code, out, err = bench(tmp_path, *options, timeout=120)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (code, out, err)
    assert not (tmp_path / "bench-results").exists(), "refused before anything was started or written"


def test_a_run_that_timed_nothing_exits_3(tmp_path):
    code, out, err = bench(
        tmp_path,
        "--backend",
        "numpy",
        "--mode",
        "take-out",
        "--workload",
        "backward_decode",
        "--processes",
        "1",
        "--rounds",
        "3",
        "--out-dir",
        "out",
    )
    assert code == 3 and "nothing was timed" in out, out + err


def test_compare_is_advice_beside_a_stored_run_never_a_gate(tmp_path):
    code, _, err = bench(
        tmp_path, "--backend", "numpy", "--quick", "--workload", "forward_prefill", "--rounds", "6", "--out-dir", "a"
    )
    assert code == 0, err
    base = json.loads((tmp_path / "a" / "bench.json").read_text())
    for b in base["benchmarks"]:
        b["stats"]["median"] /= 10  # the stored run ten times faster: still only advice
    (tmp_path / "base.json").write_text(json.dumps(base))
    code, out, err = bench(
        tmp_path,
        "--backend",
        "numpy",
        "--quick",
        "--workload",
        "forward_prefill",
        "--rounds",
        "6",
        "--out-dir",
        "b",
        "--compare",
        "base.json",
    )
    assert code == 0 and "ADVISORY" in out and "test_forward_prefill[numpy-suite-B8-T1024-d768]" in out, out + err


def test_more_workers_than_memory_holds_are_refused_or_fall_back_to_one_process(tmp_path, monkeypatch, capsys):
    """Every implementation's workers are alive at once: a run that would not fit says so before
    any worker starts, and a --quick run that fits in one process each (not two) takes one."""
    import argparse

    from gpt2_conformance.bench import command

    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    monkeypatch.setattr(command.machine, "available_memory_bytes", lambda: int(5 * command.WORKER_BYTES))
    args = parser.parse_args(["bench", "--quick", "--out-dir", str(tmp_path)])
    assert command._memory(args, 4) is None and args.processes == 1
    assert "one process per implementation: 4 implementations in two each would need" in capsys.readouterr().out
    args = parser.parse_args(["bench", "--processes", "2", "--out-dir", str(tmp_path)])
    assert "4 implementations in 2 process(es) each need about" in command._memory(args, 4)
    args = parser.parse_args(["bench", "--quick", "--out-dir", str(tmp_path)])
    assert command._memory(args, 2) is None and args.processes == 2
