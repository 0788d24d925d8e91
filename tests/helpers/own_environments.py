"""Backends that run in an environment of their own (their registry entry's `environment`, e.g.
paddlenlp-gpt): the tests use that environment as a user would after `gpt2-conformance env NAME`,
building it when it is missing (the command holds a lock per environment, so two test workers
wait for one build)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest

from gpt2_conformance import registry
from gpt2_conformance.run import envs


def ensure_built(name: str) -> None:
    """Build NAME's environment unless it is up to date; its pins come from the package index, so
    without one the test is skipped, saying so."""
    if not registry.unbuilt_environment(name):
        return
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10).close()
    except OSError as exc:
        pytest.skip(f"{name}: its environment is not built and the package index cannot be reached ({exc})")
    built = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "env", name], capture_output=True, text=True, timeout=1800
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]


def python_for(name: str) -> str:
    """The interpreter a backend's own code runs on: its environment's (built first), else this one."""
    ensure_built(name)  # returns at once for a backend without an environment of its own
    return envs.child_python(name)
