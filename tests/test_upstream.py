"""`gpt2-conformance upstream` (conformance/upstream/): every cause behind a third-party backend's
waivers has a standalone reproduction that imports only the implementation's library and numpy,
still reproduces (exit 1 with the expected output) in a fresh interpreter, and once fixed (a
monkeypatched library) exits 0 and makes its waivers stale. Also: the command's bad input, a
plug-in adapter's waiver file with and without reproductions, and the stale-waiver hook."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpt2_conformance import registry, spec, waivers
from gpt2_conformance import results as res
from gpt2_conformance.upstream import causes as cz
from helpers.own_environments import python_for

WITH_CAUSES = [n for n in registry.judged() if cz.for_backend(n) is not None]
OURS = ("gpt2_conformance", "conformance")


def _cli(*args, cwd=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "upstream", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def test_every_builtin_third_party_backend_has_reproductions():
    """The seven built-in third-party backends each explain every waiver (a cause or a reason)."""
    assert {"hf-transformers", "keras-hub-jax", "mlx-lm", "onnxruntime-hf", "transformer-lens"} <= set(WITH_CAUSES)
    for name in WITH_CAUSES:
        found = cz.for_backend(name)
        assert found.uncovered() == [], f"{name}: waivers without a cause or a not_reported reason"
        assert all(
            c.text.get("happens") and c.text.get("expected") and c.tracker.startswith("https://github.com/")
            for c in found.causes
        ), name


@pytest.mark.parametrize("name", WITH_CAUSES)
def test_scripts_import_only_the_library_and_numpy(name):
    """Scanned, not run: every import (lazy ones included) is the standard library, numpy or a
    module the backend's registry entry requires, and never this suite."""
    allowed = set(sys.stdlib_module_names) | {"numpy"} | {r.split(".")[0] for r in registry.builtin()[name].requires}
    for cause in cz.for_backend(name).causes:
        tree = ast.parse(cause.render())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert imported - allowed == set(), (name, cause.id)
        assert not imported & set(OURS), (name, cause.id)
        assert "sys.exit(" in cause.render(), (name, cause.id)  # its exit status is the verdict


def test_unknown_name_and_a_backend_without_waivers_are_usage_errors(tmp_path):
    for name, message in (
        ("no-such-backend", "unknown backend 'no-such-backend'"),
        ("numpy", "numpy has no waiver file"),
    ):
        out = _cli(name, "--out-dir", str(tmp_path / "o"), cwd=tmp_path)
        assert out.returncode == 2, out.stderr
        assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "o").exists()


def _plugin(tmp_path, with_causes: bool):
    """A plug-in adapter (numpy only) whose WAIVERS names a waiver file; with_causes: an
    upstream/ folder beside it with one cause that reproduces and one that is fixed."""
    (tmp_path / "waivers.toml").write_text(
        'implementation = "toy"\n'
        '[[waiver]]\nclause = "BOUNDS-TOKEN"\nreason = "wraps -1"\nlink = "https://example.org/toy#L1"\n'
        '[[waiver]]\nclause = "INIT-WPE"\nreason = "std 0.02"\nlink = "https://example.org/toy#L2"\n'
    )
    (tmp_path / "toy_adapter.py").write_text(
        textwrap.dedent(f"""
        class ToyAdapter:
            WAIVERS = {str(tmp_path / "waivers.toml")!r}
    """)
    )
    if with_causes:
        up = tmp_path / "upstream"
        up.mkdir()
        (up / "wraps.py").write_text('import sys\nimport numpy as np\nprint("got:", np.arange(3)[-1])\nsys.exit(1)\n')
        (up / "init.py").write_text('import sys\nprint("got: std {{STD}}")\nsys.exit(0)\n')
        (up / "causes.toml").write_text(
            textwrap.dedent("""
            tracker = "https://github.com/example/toy/issues"
            versions = ["numpy"]
            [[cause]]
            id = "wraps"
            clauses = ["BOUNDS-TOKEN"]
            title = "toy: id -1 wraps"
            script = "wraps.py"
            expect = "got: 2"
            happens = "It wraps."
            expected = "tf.gather raises."
            [[cause]]
            id = "init"
            clauses = ["INIT-WPE"]
            title = "toy: wpe std"
            script = "init.py"
            params = {STD = "0.01"}
            expect = "std 0.02"
            happens = "0.02."
            expected = "0.01."
        """)
        )
    return "toy_adapter:ToyAdapter"


def test_an_adapter_with_waivers_but_no_reproductions_is_skipped_with_a_message(tmp_path):
    spec_ = _plugin(tmp_path, with_causes=False)
    out = _cli(spec_, "--out-dir", "o", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "skipped, no reproductions" in out.stderr


def test_drafts_index_and_stale_waiver_for_a_plugin_adapter(tmp_path):
    """The whole command on a toy adapter: scripts written with their params filled in, one draft
    per cause with the script and its real output inline, the index with both statuses, and the
    fixed cause's waiver reported stale (exit 1)."""
    spec_ = _plugin(tmp_path, with_causes=True)
    out = _cli(spec_, "--out-dir", "o", "--jobs", "2", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "STALE WAIVER: INIT-WPE" in out.stderr
    folder = tmp_path / "o" / "toy_adapter-ToyAdapter"
    status = json.loads((folder / "status.json").read_text())
    assert {d["cause"]: d["status"] for d in status["drafts"]} == {"wraps": cz.REPRODUCES, "init": cz.FIXED}
    assert status["stale_waivers"] == ["INIT-WPE"]
    assert "std 0.01" in (folder / "init.py").read_text()
    draft = (folder / "wraps.md").read_text()
    for part in (
        "# toy: id -1 wraps",
        "## System info",
        "- numpy: ",
        "## What happens",
        "It wraps.",
        "## What I expected, and why",
        "```python\nimport sys",
        "got: 2",
        "Exit status: 1 (reproduces)",
        "None found.",
    ):
        assert part in draft, part
    assert draft.count("BOUNDS-TOKEN") == 1  # the clause appears once, as a cross-reference
    index = (tmp_path / "o" / "README.md").read_text()
    assert "| reproduces |" in index and "| no longer reproduces |" in index and "## Stale waivers" in index
    assert "toy_adapter-ToyAdapter/wraps.md" in index


def _outcome(cause_id, clauses, status):
    cause = cz.Cause(cause_id, tuple(clauses), "t", "s.py", "x", "", ())
    return cz.Outcome(cause, status, 0 if status == cz.FIXED else 1)


def test_a_fixed_reproduction_makes_its_waiver_stale_and_only_when_every_cause_is_fixed():
    outcomes = [
        _outcome("a", ["BOUNDS-TOKEN"], cz.FIXED),
        _outcome("b", ["BOUNDS-TOKEN", "BOUNDS-MESSAGE"], cz.REPRODUCES),
        _outcome("c", ["INIT-WPE", "INIT-WTE"], cz.FIXED),
        _outcome("d", ["SHAPE-EMPTY"], cz.BROKEN),
    ]
    fixed = cz.fixed_clauses(outcomes)
    assert sorted(fixed) == ["INIT-WPE", "INIT-WTE"]  # BOUNDS-TOKEN: cause b still reproduces
    clauses = [res.ClauseResult(spec.clause(c), res.FAIL, "m") for c in ("INIT-WPE", "BOUNDS-TOKEN")]
    result = res.SuiteResult("x", "cpu", spec.SPEC_VERSION, clauses, 0.0)
    wl = [
        waivers.Waiver("INIT-WPE", "r", "https://example.org/1"),
        waivers.Waiver("BOUNDS-TOKEN", "r", "https://example.org/2"),
    ]
    waivers.apply(result, wl, fixed)
    assert [c.status for c in result.clauses] == [res.WAIVED, res.WAIVED]
    assert result.stale_waivers == [
        "INIT-WPE is waived (https://example.org/1) but its upstream reproduction c.py no longer reproduces (exit 0)"
    ]
    assert result.exit_code == 1
    plain = res.SuiteResult(
        "x", "cpu", spec.SPEC_VERSION, [res.ClauseResult(spec.clause("INIT-WPE"), res.FAIL, "m")], 0.0
    )
    waivers.apply(plain, wl[:1])  # without reproductions: as before
    assert plain.stale_waivers == [] and plain.exit_code == 0


# -- the real scripts, each in a fresh interpreter --------------------------------------------

# Runs a script as __main__ and, at exit, reports every module of this suite it imported.
WRAPPER = r"""
import atexit, runpy, sys
path = sys.argv[1]
atexit.register(lambda: sys.stderr.write("\nGPT2C-OURS %r\n" % sorted(
    m for m in sys.modules if m.split(".")[0] in ("gpt2_conformance", "conformance"))))
sys.argv = [path]
runpy.run_path(path, run_name="__main__")
"""


def _run_wrapped(items, env=None, python=sys.executable):
    def one(item):
        cause, path = item
        done = subprocess.run(
            [python, "-c", WRAPPER, path],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=os.path.dirname(path),
            env=env or cz.environment(),
        )
        return cause, done

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, items))


@pytest.mark.slow
@pytest.mark.parametrize("name", WITH_CAUSES)
def test_every_reproduction_still_reproduces_standalone(name, tmp_path):
    """Each script in a fresh interpreter (two at a time): exit 1, the expected output, and no
    module of this suite imported (the child's sys.modules)."""
    lacking = registry.missing_framework(name)
    if lacking:
        pytest.skip(f"{name}: {lacking} is not installed")
    python = python_for(name)  # paddlenlp-gpt's library lives in its own environment
    items = cz.write_scripts(cz.for_backend(name), str(tmp_path))
    for cause, done in _run_wrapped(items, python=python):
        assert "GPT2C-OURS []" in done.stderr, (cause.id, done.stderr[-1500:])
        assert done.returncode == 1 and cause.expect in done.stdout, (
            cause.id,
            done.returncode,
            done.stdout,
            done.stderr[-1500:],
        )


SITECUSTOMIZE_FIX_HF_WPE = """
# A deliberately fixed transformers: GPT2LMHeadModel draws wpe at GPT-2's std 0.01 after its own init.
import torch
from transformers import GPT2LMHeadModel

_post_init = GPT2LMHeadModel.post_init


def post_init(self):
    _post_init(self)
    with torch.no_grad():
        self.transformer.wpe.weight.normal_(0.0, 0.01)


GPT2LMHeadModel.post_init = post_init
"""


@pytest.mark.slow
def test_a_fixed_library_makes_the_reproduction_exit_0_and_the_waiver_stale(tmp_path):
    """transformers patched (a sitecustomize on PYTHONPATH) to initialise wpe as GPT-2 does: the
    wpe-init-std reproduction exits 0, the other two still reproduce, and INIT-WPE's waiver is
    reported stale on a result where the suite still failed the clause."""
    if registry.missing_framework("hf-transformers"):
        pytest.skip("transformers is not installed")
    patch = tmp_path / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(SITECUSTOMIZE_FIX_HF_WPE)
    env = cz.environment()
    env["PYTHONPATH"] = os.pathsep.join([str(patch), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    outcomes = cz.reproduce("hf-transformers", jobs=2, env=env)
    assert {o.cause.id: o.status for o in outcomes} == {
        "wpe-init-std": cz.FIXED,
        "empty-sequence": cz.REPRODUCES,
        "embedding-index-error-message": cz.REPRODUCES,
    }, [(o.cause.id, o.status, o.stdout, o.stderr[-800:]) for o in outcomes]
    fixed = cz.fixed_clauses(outcomes)
    assert list(fixed) == ["INIT-WPE"]
    found = cz.for_backend("hf-transformers")
    result = res.SuiteResult(
        "hf-transformers",
        "cpu",
        spec.SPEC_VERSION,
        [res.ClauseResult(spec.clause(w.clause), res.FAIL, "m") for w in found.waivers],
        0.0,
    )
    waivers.apply(result, list(found.waivers), fixed)
    assert [s.split()[0] for s in result.stale_waivers] == ["INIT-WPE"] and result.exit_code == 1


@pytest.mark.parametrize(
    "option, value, says",
    [("--jobs", "-1", "--jobs -1: must be >= 1"), ("--timeout", "0", "--timeout 0.0: must be > 0 seconds")],
)
def test_jobs_and_timeout_out_of_range_are_refused(tmp_path, capsys, option, value, says):
    from gpt2_conformance import cli

    assert cli.main(["upstream", "mlx-lm", option, value, "--out-dir", str(tmp_path)]) == 2
    assert says in capsys.readouterr().err
    assert not os.listdir(tmp_path)  # nothing written, nothing run
