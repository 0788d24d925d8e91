"""What lists every built-in backend is generated from the registry entries by
scripts/regenerate.py (the README's backend table, tox.ini's env per backend): these fail while a
committed file is not what the script writes now, naming the command that mends it."""

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regenerate", ROOT / "scripts" / "regenerate.py")
regenerate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regenerate)


def _needs_every_framework():
    from gpt2_conformance import registry

    missing = {n: registry.missing_framework(n) for n in registry.shipped()}
    missing = {n: m for n, m in missing.items() if m}
    if missing:
        pytest.skip(f"the backend table reads each adapter's Capabilities; not installed here: {missing}")


@pytest.mark.parametrize("name", ["README.md", "tox.ini"])
def test_generated_file_is_current(name):
    if name == "README.md":
        _needs_every_framework()
    want = regenerate.expected(name)[ROOT / name]
    got = (ROOT / name).read_text(encoding="utf-8")
    assert got == want, f"{name} is not what the registry entries give: run `python scripts/regenerate.py`"


def test_a_new_entry_gets_its_row_and_its_tox_env(monkeypatch):
    """The generator is driven by the entries alone: one more entry, one more row and env."""
    from gpt2_conformance.api.backend import REFERENCE, Backend

    entries = dict(regenerate.registry.shipped())
    numpy_entry = entries["numpy"]
    extra = Backend(
        name="numpy-copy",
        adapter="adapter:NumpyAdapter",
        requires=("numpy",),
        kind=REFERENCE,
        extra="",
        wraps="the NumPy reference again",
        package=numpy_entry.package,
    )
    monkeypatch.setattr(regenerate.registry, "shipped", lambda: {**entries, "numpy-copy": extra})
    monkeypatch.setattr(
        regenerate.registry, "resolve", lambda name: regenerate.registry.load_object(extra.adapter_spec)
    )
    assert "[testenv:numpy-copy]\ncommands = gpt2-conformance run --backend numpy-copy" in regenerate.tox_envs()
    assert regenerate.tox_envlist().startswith("envlist = numpy, ")
    row = regenerate.backend_row("numpy-copy", extra)
    assert row == "| `numpy-copy` | reference | the NumPy reference again | (core) | float32, float16 | cpu | all | 0 |"
