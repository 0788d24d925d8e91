"""The gate on real timings (`pytest tests/benchmarks --run-bench`; timed, so it runs with the
benchmarks, on an idle machine, never in the plain test run): an implementation timed against
itself passes at 10%, and the same implementation with a real 20% slowdown of its native forward
(each call waits out a fifth of its own time) fails at 10%: with 80 rounds, as the gate's default
40 left one of three tries' intervals at [0.97, 1.50] on this one-thread fancy-index forward.
The 2x case, which no machine's noise can hide, is in the plain test run (tests/bench/test_command.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import bench_adapters

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gate(tmp_path, new: str):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gpt2_conformance.cli",
            "bench",
            "--adapter",
            new,
            "--against",
            bench_adapters.NATIVE_NUMPY_SPEC,
            "--mode",
            "native",
            "--workload",
            "forward_prefill",
            "--fail-above",
            "10",
            "--rounds",
            "80",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def test_itself_passes_and_a_real_20_percent_slowdown_fails_at_10_percent(tmp_path):
    same = _gate(tmp_path / "same", bench_adapters.NATIVE_NUMPY_SPEC)
    assert same.returncode == 0 and ": ok: " in same.stdout, same.stdout[-3000:] + same.stderr[-2000:]
    slow = _gate(tmp_path / "slow", bench_adapters.SLOWER_NUMPY_SPEC)
    assert slow.returncode == 1 and ": SLOWER: " in slow.stdout, slow.stdout[-3000:] + slow.stderr[-2000:]
