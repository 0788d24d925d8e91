"""The pytest route (`pytest --pyargs gpt2_conformance.suite --gpt2c-...`) means what `run`
means: a waived clause's failures are xfail with the waiver's reason and link (exit 0), a waiver
whose clause passed is reported stale and fails the run, an unwaived failure fails it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TESTS_DIR = os.path.dirname(__file__)
WAIVER = """
[[waiver]]
clause = "{clause}"
reason = "ids wrap like a Python list: -1 reads the last row"
link = "https://github.com/example/gpt2/issues/1"
"""


def _pytest(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "bounds",
            "--gpt2c-adapter",
            "helpers.mutants:NegativeIdsWrap",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    return out.returncode, out.stdout + out.stderr


def _waivers(tmp_path, *clauses) -> str:
    path = tmp_path / "waivers.toml"
    path.write_text("".join(WAIVER.format(clause=c) for c in clauses))
    return str(path)


@pytest.mark.slow  # three runs of the BOUNDS tests in child processes
def test_waived_failures_are_xfail_and_stale_waivers_fail(tmp_path):
    code, out = _pytest(tmp_path)
    assert code == 1 and " failed" in out.splitlines()[-1], out[-2000:]
    code, out = _pytest(tmp_path, "--gpt2c-waivers", _waivers(tmp_path, "BOUNDS-TOKEN", "BOUNDS-MESSAGE"))
    assert code == 0, out[-3000:]
    last = out.splitlines()[-1]
    assert "xfailed" in last and "failed" not in last.replace("xfailed", ""), last
    assert "waived deviations (xfail): BOUNDS-MESSAGE, BOUNDS-TOKEN" in out, out[-2000:]
    code, out = _pytest(
        tmp_path, "--gpt2c-waivers", _waivers(tmp_path, "BOUNDS-TOKEN", "BOUNDS-MESSAGE", "BOUNDS-POSITION")
    )
    assert code == 1 and "STALE WAIVER: BOUNDS-POSITION" in out, out[-2000:]


def test_a_backend_or_checkpoint_that_cannot_run_is_one_usage_line(tmp_path, monkeypatch):
    """--gpt2c-backend with an unknown name, or one whose framework is missing: pytest's own usage
    error, one line, before collection (not a collection error with two tracebacks)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "-q",
            "-p",
            "no:cacheprovider",
            "--gpt2c-backend",
            "nope",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 4, out.stdout + out.stderr
    assert "ERROR: gpt2-conformance: --gpt2c-backend 'nope': unknown backend; available: numpy," in out.stderr
    assert "Traceback" not in out.stdout + out.stderr and "ERROR collecting" not in out.stdout
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "-q",
            "-p",
            "no:cacheprovider",
            "--gpt2c-backend",
            "numpy",
            "--gpt2c-checkpoint",
            "nope.safetensors",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert (
        out.returncode == 4
        and "ERROR: gpt2-conformance: --gpt2c-checkpoint nope.safetensors: no such file" in out.stderr
    ), out.stdout + out.stderr

    from gpt2_conformance import pytest_plugin, registry

    class Config:
        def getoption(self, name, default=None):
            return {"--gpt2c-backend": "tensorflow"}.get(name, default)

    monkeypatch.setattr(registry, "missing_framework", lambda name: "tensorflow")
    with pytest.raises(
        pytest.UsageError,
        match=r"--gpt2c-backend 'tensorflow' needs tensorflow, which is not "
        r"installed: pip install 'gpt2-conformance\[tensorflow\]'",
    ):
        pytest_plugin.pytest_configure(Config())
