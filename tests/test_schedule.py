"""`run --backend all` starts the backends longest first by the last run's times
(conformance/run/schedule.py) and prints their scorecards in the registry's order."""

from __future__ import annotations

import argparse
import json
import threading

import pytest

from gpt2_conformance import registry, spec
from gpt2_conformance import results as res
from gpt2_conformance.api import machine
from gpt2_conformance.run import command, schedule


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(machine.CACHE_ROOT_VARIABLE, str(tmp_path / "cache"))


def test_without_a_record_judged_implementations_start_before_references():
    names = registry.available()
    ordered = schedule.order(names, "cpu")
    assert sorted(ordered) == sorted(names)
    judged, references = registry.judged(), registry.references()
    assert ordered[: len(judged)] == judged and ordered[len(judged) :] == references


def test_recorded_times_start_the_longest_first_and_unrecorded_ones_before_them():
    schedule.record({"numpy": 8.0, "tract-hf": 53.0, "jax": 36.0, "mlx-lm": 27.0}, "cpu")
    schedule.record({"torch": 15.0}, "cpu")  # a later run of one backend keeps the others' times
    ordered = schedule.order(["numpy", "torch", "jax", "llama-cpp", "tract-hf", "mlx-lm"], "cpu")
    assert ordered == ["llama-cpp", "tract-hf", "jax", "mlx-lm", "torch", "numpy"]
    assert schedule.order(["numpy", "jax"], "gpu") == ["numpy", "jax"]  # another device's record: none


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"numpy": "fast"}'])
def test_an_unreadable_record_only_costs_the_order(content):
    schedule.record({"numpy": 1.0}, "cpu")
    path = machine.private_cache_folder(schedule.FOLDER) + "/cpu.json"
    with open(path, "w") as f:
        f.write(content)
    assert schedule.order(["numpy", "jax", "tract-hf"], "cpu") == ["tract-hf", "numpy", "jax"]
    schedule.record({"jax": 2.0}, "cpu")
    assert json.load(open(path)) == {"jax": 2.0}


def test_run_all_starts_longest_first_and_prints_in_the_registry_order(monkeypatch, capsys):
    """The CLI's `run --backend all` with the judging replaced by a stand-in that records when each
    backend started: started in schedule.order, printed in the registry's order, times recorded."""
    names = ["numpy", "torch", "jax"]
    monkeypatch.setattr(registry, "available", lambda: names)
    monkeypatch.setattr(registry, "missing_framework", lambda name: None)
    schedule.record({"numpy": 5.0, "torch": 20.0, "jax": 10.0}, "cpu")
    started, lock = [], threading.Lock()
    took = {"numpy": 4.0, "torch": 21.0, "jax": 12.0}

    def judged(name, args, log_dir, side_by_side=1, shown=None):
        with lock:
            started.append(name)
        result = res.SuiteResult(name, "cpu", spec.SPEC_VERSION, res.aggregate([]), took[name])
        result.log_path = f"{name}.log"
        result.parity = {"error": "not computed: a stand-in"}
        return result

    monkeypatch.setattr(command, "_judge_named", judged)
    args = argparse.Namespace(
        backend="all",
        adapter=None,
        device="cpu",
        report_dir=None,
        jobs=1,
        thorough=False,
        seed=None,
        timeout=60.0,
        case=[],
        no_shrink=False,
        verbose=False,
        waivers=None,
        durations=0,
        quiet=True,
        no_build_envs=True,
    )
    command._run_all(args)
    printed = [
        line.split()[4] for line in capsys.readouterr().out.splitlines() if line.startswith("gpt2-conformance spec")
    ]
    assert started == ["torch", "jax", "numpy"]
    assert printed == names
    assert schedule.recorded("cpu") == took
