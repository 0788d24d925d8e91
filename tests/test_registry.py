"""One registry: a backend is one entry (gpt2_conformance.api.backend.Backend) in its own folder,
named after it, and everything else reads that entry or is checked against it here: the folder
names, tox's envs, the pyproject extras, the reference backends' bench modes, and (with a
throwaway backend registered by one entry) `list`, `run`, `bench --quick` and `merge`."""

from __future__ import annotations

import configparser
import importlib
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

from gpt2_conformance import registry
from gpt2_conformance.api.backend import REFERENCE, Backend

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENTRIES = registry.builtin()


def test_every_folder_is_named_after_its_backend():
    """A folder with one entry is its name; a family's folder (BACKENDS, one entry per framework)
    is the prefix of each entry's name, and each entry's waiver file is its own."""
    for name, entry in ENTRIES.items():
        folder = entry.package.rpartition(".")[2]
        assert name.replace("-", "_") == folder or name.replace("-", "_").startswith(folder + "_"), (
            name,
            entry.package,
        )
    waiver_files = [e.waivers_path() for e in ENTRIES.values() if e.waivers]
    assert len(set(waiver_files)) == len(waiver_files), "two entries share a waiver file"


def test_every_entry_resolves_to_an_importable_spec_and_its_waiver_file_exists():
    for name, entry in ENTRIES.items():
        module = entry.adapter_spec.partition(":")[0]
        assert (ROOT / "backends" / pathlib.Path(*module.split(".")[2:])).with_suffix(".py").is_file(), name
        if entry.waivers:
            assert os.path.isfile(entry.waivers_path()), name


def test_tox_has_an_env_per_backend_with_its_extra():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    envlist = tox["tox"]["envlist"]
    for name, entry in ENTRIES.items():
        section = next(
            (
                s
                for s in tox.sections()
                if s == f"testenv:{name}" or (s.startswith("testenv:") and "{" in s and _expands(s[8:], name))
            ),
            None,
        )
        assert section is not None, f"tox.ini has no [testenv:{name}]"
        assert any(_expands(part.strip(), name) for part in re.split(r",(?![^{]*})", envlist)), name
        extras = {e.strip() for e in tox[section].get("extras", "").replace("\n", ",").split(",") if e.strip()}
        assert not entry.extra or entry.extra in extras, (name, entry.extra, extras)


def _expands(pattern: str, name: str) -> bool:
    """tox's {a,b} factor syntax: whether `pattern` names `name`."""
    if "{" not in pattern:
        return pattern == name
    head, _, rest = pattern.partition("{")
    choices, _, tail = rest.partition("}")
    return any(_expands(head + c + tail, name) for c in choices.split(","))


def test_pyproject_has_every_extra_and_all_installs_each():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    everything = extras["all"][0]
    for name, entry in ENTRIES.items():
        if entry.extra:
            assert entry.extra in extras, name
            assert entry.extra in everything.partition("[")[2], (name, everything)


def test_a_bench_mode_is_declared_once():
    """A reference backend names and describes each bench mode in its registry entry only: its
    bench module's MODES and CHECK are read from there, and a mode that is not a BenchMode is
    refused where the entry is made."""
    for name, entry in ENTRIES.items():
        if entry.kind != REFERENCE:
            continue
        hooks = (
            importlib.import_module(entry.bench_module)
            if all(importlib.util.find_spec(m) for m in entry.requires)
            else None
        )
        if hooks is not None:
            assert (hooks.MODES, hooks.CHECK) == entry.mode_table(), name
    with pytest.raises(TypeError, match="bench mode 'fast' is a tuple, not a BenchMode"):
        Backend(name="x", adapter="a:B", requires=(), kind=REFERENCE, extra="", bench_modes={"fast": ()})


THROWAWAY_ENTRY = """
from gpt2_conformance.api.backend import REFERENCE, Backend

BACKEND = Backend(name="throwaway-gpt2", adapter="adapter:ThrowawayAdapter", requires=("numpy",),
                  kind=REFERENCE, extra="")
"""
THROWAWAY_ADAPTER = '''
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


class ThrowawayAdapter(NumpyAdapter):
    """A correct implementation under another name: the NumPy reference's code."""
'''


@pytest.fixture(scope="module")
def throwaway(tmp_path_factory):
    """A throwaway backend registered with one entry: its folder, and one entry-point line
    (what an installed package's metadata holds), found through PYTHONPATH."""
    root = tmp_path_factory.mktemp("throwaway")
    (root / "throwaway_gpt2").mkdir()
    (root / "throwaway_gpt2" / "__init__.py").write_text(THROWAWAY_ENTRY)
    (root / "throwaway_gpt2" / "adapter.py").write_text(THROWAWAY_ADAPTER)
    info = root / "throwaway_gpt2-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway-gpt2\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gpt2_conformance.backends]\nthrowaway-gpt2 = throwaway_gpt2\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    return root, env


def _cli(env, cwd, *args, timeout=900):
    out = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    return out.returncode, out.stdout + out.stderr


def test_throwaway_backend_is_listed(throwaway):
    root, env = throwaway
    code, out = _cli(env, root, "list")
    assert code == 0 and "throwaway-gpt2" in out.split(), out


@pytest.mark.slow  # a whole suite run, a quick bench and a merge, each in child processes
def test_throwaway_backend_runs_benches_and_merges(throwaway):
    root, env = throwaway
    code, out = _cli(env, root, "run", "--backend", "throwaway-gpt2", "--report-dir", "r")
    assert code == 0, out[-3000:]
    report = json.loads((root / "r" / "gpt2-conformance-throwaway-gpt2-cpu.json").read_text())
    assert report["summary"]["FAIL"] == 0 and report["summary"]["PASS"] >= 30, report["summary"]
    code, out = _cli(
        env,
        root,
        "bench",
        "--quick",
        "--backend",
        "throwaway-gpt2",
        "--workload",
        "forward_decode",
        "--processes",
        "1",
        "--rounds",
        "3",
        "--out-dir",
        "b",
    )
    assert code == 0, out[-3000:]
    rows = json.loads((root / "b" / "bench.json").read_text())["benchmarks"]
    assert rows and all("throwaway-gpt2" in r["name"] for r in rows), [r["name"] for r in rows]
    code, out = _cli(env, root, "merge", "r/gpt2-conformance-throwaway-gpt2-cpu.json", "--out-dir", "m")
    assert code == 0, out[-3000:]
    assert "throwaway-gpt2" in (root / "m" / "merged.md").read_text()


def test_child_env_resolves_the_backends_cache_folder(monkeypatch, tmp_path):
    """A backend's child_env reaches its suite processes with CACHE as its private folder; a
    variable naming CACHE is left out where no private folder can be had (Windows), the others
    stay; a backend without one, or not registered, gets nothing."""
    import tempfile

    from gpt2_conformance.api import machine
    from gpt2_conformance.api.backend import CACHE

    entry = Backend(
        name="cached-gpt2",
        adapter="adapter:A",
        requires=(),
        kind="reference",
        extra="",
        child_env={"SOME_CACHE_DIR": CACHE, "SOME_FLAG": "1"},
    )
    monkeypatch.setattr(registry, "builtin", lambda: {"cached-gpt2": entry})
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = registry.child_env("cached-gpt2")
    assert env == {
        "SOME_CACHE_DIR": str(tmp_path / f"gpt2-conformance-{os.getuid()}" / "cached-gpt2-cache"),
        "SOME_FLAG": "1",
    }, env
    assert os.path.isdir(env["SOME_CACHE_DIR"])
    monkeypatch.setattr(machine, "private_cache_folder", lambda name: None)
    assert registry.child_env("cached-gpt2") == {"SOME_FLAG": "1"}
    assert registry.child_env("numpy") == {} and registry.child_env("no-such-backend") == {}


def test_the_jax_backend_keeps_its_compiled_shapes():
    """Why the jax entry has a child_env: JAX's persistent compilation cache, every compile kept."""
    env = registry.child_env("jax")
    assert (
        env["JAX_COMPILATION_CACHE_DIR"].endswith("jax-cache")
        and env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    )


def test_every_backend_has_a_test_module_of_its_own():
    """tests/backends/test_<name>.py for every built-in backend (dashes as underscores): one place,
    one naming scheme, for what each adapter must keep true of itself."""
    folder = ROOT / "tests" / "backends"
    missing = [n for n in ENTRIES if not (folder / f"test_{n.replace('-', '_')}.py").is_file()]
    assert missing == [], f"no tests/backends/test_<name>.py for {missing}"
