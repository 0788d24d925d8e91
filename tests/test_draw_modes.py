"""The draw modes (SPEC.md "Draw modes"): the default is derandomized, the thorough mode draws
THOROUGH_FACTOR times the examples from a seed that is printed, stored and replayable."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from gpt2_conformance import spec
from gpt2_conformance.runtime import strategies


def _drawn(thorough: bool, seed: int | None) -> list[int]:
    """The values one drawn test sees under a mode."""
    saved = strategies.MODE.thorough, strategies.MODE.seed
    strategies.MODE.thorough, strategies.MODE.seed = thorough, seed
    seen = []
    try:
        @strategies.suite_settings(max_examples=5)
        @given(st.integers(0, 10**9))
        def test(x):
            seen.append(x)

        test()
    finally:
        strategies.MODE.thorough, strategies.MODE.seed = saved
    return seen


def test_default_draws_are_the_same_every_time():
    assert _drawn(False, None) == _drawn(False, None)


def test_thorough_draws_more_and_a_seed_replays_them():
    first, again, other = _drawn(True, 7), _drawn(True, 7), _drawn(True, 8)
    assert len(first) > len(_drawn(False, None))  # THOROUGH_FACTOR x the examples
    assert first == again
    assert first != other


def test_cli_seed_without_thorough_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "gpt2_conformance.cli", "run", "--backend", "numpy", "--seed", "3"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "--seed replays a thorough run" in out.stderr, out.stderr


def test_spec_says_what_each_mode_draws():
    text = spec.markdown()
    assert "## Draw modes" in text and f"{spec.THOROUGH_FACTOR} times the examples" in text


def test_thorough_run_stores_and_prints_its_seed(tmp_path):
    """A thorough run on one small clause set: the seed is on the console and in the JSON."""
    out = subprocess.run([sys.executable, "-c",
                          "import sys; from gpt2_conformance import cli; from gpt2_conformance.run import runner\n"
                          "real = runner.run_backend\n"
                          "runner.run_backend = lambda *a, **kw: real(*a, **dict(kw, extra_args=[*kw['extra_args'], "
                          "'-k', 'test_exact_sum and not layout']))\n"
                          "sys.exit(cli.main(sys.argv[1:]))",
                          "run", "--backend", "numpy", "--thorough", "--seed", "1234", "--report-dir", str(tmp_path)],
                         capture_output=True, text=True)
    assert "seed 1234; replay with --thorough --seed 1234" in out.stdout, out.stdout + out.stderr
    report = json.loads((tmp_path / "gpt2-conformance-numpy-cpu.json").read_text())
    assert report["environment"]["draws"] == {"mode": "thorough", "examples_factor": spec.THOROUGH_FACTOR,
                                              "seed": 1234, "replay": "--thorough --seed 1234"}
    exact = next(c for c in report["clauses"] if c["id"] == "LOOKUP-EXACT")
    assert exact["status"] == "PASS", exact
