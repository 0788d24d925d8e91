"""`gpt2-conformance env NAME` and running a backend in an environment of its own
(gpt2_conformance.run.envs): the entry -> pip command lines, the one-line refusal while the
environment is missing or out of date, idempotence. Nothing is installed here: the commands are
recorded, not run (the slow test at the end builds the real one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpt2_conformance import cli, registry
from gpt2_conformance.api import environment
from gpt2_conformance.api.backend import JUDGED, Backend, Environment
from gpt2_conformance.run import envs

PINS = ("somepkg==1.2.3", "otherpkg[extra]==4.5")


def _entry(name: str = "fake-own-env", requirements=PINS) -> Backend:
    found = Backend(
        name=name,
        adapter="adapter:make_adapter",
        requires=("somepkg",),
        kind=JUDGED,
        extra="",
        environment=Environment(requirements=requirements),
    )
    object.__setattr__(found, "package", "gpt2_conformance.backends.thirdparty.hf_transformers")
    return found


@pytest.fixture
def own_env(monkeypatch, tmp_path):
    """A registry with one more entry, which runs in an environment of its own, under tmp_path."""
    real = dict(registry.builtin())
    entry = _entry()
    monkeypatch.setattr(registry, "builtin", lambda: {**real, entry.name: entry})
    monkeypatch.setenv(envs.ROOT_VARIABLE, str(tmp_path / "envs"))
    return entry


@pytest.fixture
def recorded(monkeypatch):
    """subprocess.run in envs records the command lines (and makes the venv's python, as venv would)."""
    calls: list[list[str]] = []

    def fake_run(cmd, *args, **kwargs):
        calls.append(list(cmd))
        if cmd[1:3] == ["-m", "venv"]:
            python = envs.python_of(cmd[3])
            os.makedirs(os.path.dirname(python), exist_ok=True)
            open(python, "w").close()
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(envs.subprocess, "run", fake_run)
    return calls


def test_environment_pins_are_checked():
    with pytest.raises(ValueError, match="pinned"):
        Environment(requirements=("paddlepaddle>=3",))
    with pytest.raises(ValueError, match="non-empty tuple"):
        Environment(requirements="paddlepaddle==3.3.1")  # type: ignore[arg-type]  # a str, the error under test
    with pytest.raises(ValueError, match="non-empty tuple"):
        Environment(requirements=())


def test_commands_from_the_entry(own_env, tmp_path):
    wanted = envs.recipe(own_env)
    path = str(tmp_path / "envs" / own_env.name)
    fresh = envs.commands(path, wanted, venv_exists=False)
    assert fresh[0] == [sys.executable, "-m", "venv", path]
    install = fresh[1]
    assert install[:4] == [envs.python_of(path), "-m", "pip", "install"]
    # the suite as it is installed now, and every pin, in ONE pip call (one resolution)
    assert install[-len(PINS) :] == list(PINS)
    assert tuple(install[-len(PINS) - len(wanted.suite) : -len(PINS)]) == wanted.suite
    # an existing venv: only the install
    assert envs.commands(path, wanted, venv_exists=True) == [install]


def test_suite_source_is_how_it_is_installed_now():
    source = environment.suite_source()
    assert source, "no way to install the suite into another environment"
    if source[0] == "-e":  # an editable checkout (this repository's own .venv): that checkout
        assert os.path.isfile(os.path.join(source[1], "pyproject.toml"))
    else:
        assert source[0].startswith("gpt2-conformance==") or os.path.exists(source[0])


def test_missing_environment_is_one_line_naming_the_command(own_env, capsys):
    why = registry.unbuilt_environment(own_env.name)
    assert why is not None and "\n" not in why
    assert why.endswith(f"gpt2-conformance env {own_env.name}")
    # its framework is not looked for here: it is the environment's
    assert registry.missing_framework(own_env.name) is None
    assert cli.main(["run", "--backend", own_env.name, "--no-build-envs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"gpt2-conformance env {own_env.name}"), err


def test_other_backends_have_no_environment(own_env):
    assert registry.unbuilt_environment("numpy") is None
    assert envs.child_python("numpy") == sys.executable


def test_build_then_up_to_date(own_env, recorded, capsys):
    assert envs.build(own_env.name) == 0
    assert [c[1:3] for c in recorded] == [["-m", "venv"], ["-m", "pip"]]
    first = capsys.readouterr().out
    assert "built" in first
    assert registry.unbuilt_environment(own_env.name) is None
    assert envs.child_python(own_env.name) == envs.python_of(envs.folder(own_env.name))
    # the second call: nothing run, and it says so
    recorded.clear()
    assert envs.build(own_env.name) == 0
    assert recorded == []
    assert "up to date" in capsys.readouterr().out


def test_changed_pins_make_it_stale_and_rebuild_in_place(own_env, recorded, monkeypatch, capsys):
    assert envs.build(own_env.name) == 0
    changed = _entry(requirements=("somepkg==1.2.4",))
    real = dict(registry.builtin())
    monkeypatch.setattr(registry, "builtin", lambda: {**real, changed.name: changed})
    why = registry.unbuilt_environment(changed.name)
    assert why is not None and "other pins" in why and why.endswith(f"gpt2-conformance env {changed.name}")
    recorded.clear()
    assert envs.build(changed.name) == 0
    assert [c[1:3] for c in recorded] == [["-m", "pip"]]  # the venv is kept, pip brings it to the new pins
    assert recorded[0][-1] == "somepkg==1.2.4"
    with open(os.path.join(envs.folder(changed.name), envs.STAMP), encoding="utf-8") as f:
        assert json.load(f)["requirements"] == ["somepkg==1.2.4"]


def test_failed_install_leaves_no_stamp(own_env, monkeypatch, capsys):
    monkeypatch.setattr(envs.subprocess, "run", lambda cmd, *a, **k: subprocess.CompletedProcess(cmd, 1))
    assert envs.build(own_env.name) == 1
    assert "exited with 1" in capsys.readouterr().err
    assert registry.unbuilt_environment(own_env.name) is not None


def test_dry_run_runs_nothing(own_env, recorded, capsys):
    assert envs.build(own_env.name, dry_run=True) == 0
    assert recorded == []
    out = capsys.readouterr().out
    assert "would run:" in out and "somepkg==1.2.3" in out
    assert registry.unbuilt_environment(own_env.name) is not None


def test_env_refuses_unknown_and_ordinary_backends(own_env, capsys):
    assert cli.main(["env", "no-such-backend"]) == 2
    assert "unknown backend 'no-such-backend'" in capsys.readouterr().err
    assert cli.main(["env", "numpy"]) == 2
    err = capsys.readouterr().err
    assert "runs in this environment" in err and own_env.name in err


def test_run_all_skips_an_unbuilt_environment_with_no_build_envs_saying_so(own_env, monkeypatch, capsys):
    from gpt2_conformance.run import command

    judged: list[str] = []
    monkeypatch.setattr(registry, "available", lambda: ["numpy", own_env.name])
    monkeypatch.setattr(command, "_judge_named", lambda name, *a, **k: judged.append(name) or _fake_result(name))
    monkeypatch.setattr(command.schedule, "record", lambda *a, **k: None)
    monkeypatch.setattr(envs, "build", lambda *a, **k: pytest.fail("--no-build-envs built an environment"))
    code = cli.main(["run", "--backend", "all", "--jobs", "1", "--no-build-envs", "--quiet"])
    out = capsys.readouterr().out
    assert judged == ["numpy"]
    assert f"gpt2-conformance env {own_env.name}" in out
    assert "all backends: 1 judged, 1 not judged" in out and f"not judged: {own_env.name}: " in out
    assert code == 3, "a backend not judged is no pass of the whole run"


def test_run_all_builds_a_missing_environment_first_and_says_how_long(own_env, recorded, monkeypatch, capsys):
    monkeypatch.setattr(envs, "_call", lambda cmd, lines=None: envs.subprocess.run(cmd).returncode)
    """README command 1 judges every backend: the environment is built (announced, then its time
    and size) and the backend judged in it, the build's time apart in the summary."""
    from gpt2_conformance.run import command

    judged: list[str] = []
    monkeypatch.setattr(registry, "available", lambda: ["numpy", own_env.name])
    monkeypatch.setattr(command, "_judge_named", lambda name, *a, **k: judged.append(name) or _fake_result(name))
    monkeypatch.setattr(command.schedule, "record", lambda *a, **k: None)
    cli.main(["run", "--backend", "all", "--jobs", "1", "--quiet"])
    out = capsys.readouterr().out
    assert sorted(judged) == sorted(["numpy", own_env.name])  # started longest first (run/schedule.py)
    assert f"{own_env.name} runs in an environment of its own, not built yet: building it in " in out, out
    assert "--no-build-envs skips it" in out
    assert f"gpt2-conformance: {own_env.name}: environment built in " in out and " GB in " in out
    assert f"building the environment of {own_env.name})" in out
    assert [c[3:] for c in recorded if "install" in c][0][-len(PINS) :] == list(PINS)


def test_a_failed_build_is_one_line_and_the_backend_is_not_judged(own_env, monkeypatch, capsys):
    from gpt2_conformance.run import command

    judged: list[str] = []
    monkeypatch.setattr(registry, "available", lambda: ["numpy", own_env.name])
    monkeypatch.setattr(command, "_judge_named", lambda name, *a, **k: judged.append(name) or _fake_result(name))
    monkeypatch.setattr(command.schedule, "record", lambda *a, **k: None)
    monkeypatch.setattr(envs, "_call", lambda cmd, lines=None: 1)
    code = cli.main(["run", "--backend", "all", "--jobs", "1", "--quiet"])
    out = capsys.readouterr().out
    assert judged == ["numpy"] and code == 3
    assert f"{own_env.name}: its environment could not be built (the pip output: " in out


def _fake_result(name: str):
    """A passing stand-in for a judged backend."""
    from gpt2_conformance.run import parity
    from helpers.reports import suite_result

    result = suite_result(name)
    result.log_path, result.parity = os.devnull, parity.not_computed("not run: a stand-in result")
    return result


@pytest.mark.slow
def test_real_paddle_environment_builds_then_is_up_to_date(tmp_path):
    """Builds paddlenlp-gpt's environment where the package index answers; a second call finds it up to date."""
    import urllib.request

    if "paddlenlp-gpt" not in registry.builtin():
        pytest.skip("no paddlenlp-gpt entry in this registry")
    try:
        urllib.request.urlopen("https://pypi.org/simple/paddlepaddle/", timeout=10).close()
    except OSError as exc:
        pytest.skip(f"the package index cannot be reached ({exc}): the environment cannot be built here")
    exe = [sys.executable, "-m", "gpt2_conformance.cli"]
    built = subprocess.run([*exe, "env", "paddlenlp-gpt"], capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout + built.stderr
    again = subprocess.run([*exe, "env", "paddlenlp-gpt"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "up to date" in again.stdout
    # its suite runs there in tests/test_thirdparty.py, as every judged backend's does


def test_recipe_reads_the_installed_suite_not_an_egg_info_in_the_checkout(monkeypatch, tmp_path):
    """`pip install -e` leaves NAME.egg-info in the checkout; run from there, sys.path finds it before
    the installed record, with the working tree's requirements: the recipe must not change with it."""
    from importlib import metadata

    before = environment.recipe(_entry())
    egg = tmp_path / "gpt2_conformance.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: gpt2-conformance\nVersion: 0.1.0\n")
    (egg / "requires.txt").write_text("numpy>=1.24\nsomething-new>=1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert metadata.distribution("gpt2-conformance").read_text("INSTALLER") is None  # the egg-info comes first
    assert environment.installed().read_text("INSTALLER") is not None
    assert environment.recipe(_entry()) == before


def test_a_stale_environment_says_what_changed_not_always_the_pins(tmp_path):
    """As a user meets it, from a folder of its own: the pins are the entry's, only where the suite
    is installed from changed (another checkout); `run` and `env` name that, not the pins."""
    entry = registry.builtin().get("paddlenlp-gpt")
    if entry is None:
        pytest.skip("no paddlenlp-gpt entry in this registry")
    envs_root = tmp_path / "envs"
    path = envs_root / entry.name
    python = envs.python_of(str(path))
    os.makedirs(os.path.dirname(python))
    open(python, "w").close()
    wanted = environment.recipe(entry)
    elsewhere = ("-e", str(tmp_path / "another-checkout"))
    built = dict(
        requirements=list(wanted.requirements),
        suite=list(elsewhere),
        suite_dependencies=list(wanted.suite_dependencies),
        python=wanted.python,
    )
    (path / envs.STAMP).write_text(json.dumps(built))
    env = dict(os.environ, **{envs.ROOT_VARIABLE: str(envs_root)})
    exe = [sys.executable, "-m", "gpt2_conformance.cli"]
    changed = (
        f"as the suite was installed into it from {' '.join(elsewhere)}, and runs from {' '.join(wanted.suite)} now"
    )
    run = subprocess.run(
        [*exe, "run", "--backend", entry.name, "--no-build-envs"], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert (run.returncode, run.stdout) == (2, ""), run.stdout + run.stderr
    assert run.stderr == (
        f"gpt2-conformance: error: backend '{entry.name}': its environment ({path}) is out of date, {changed}: "
        f"gpt2-conformance env {entry.name}\n"
    ), run.stderr
    assert "pins" not in run.stderr
    dry = subprocess.run(
        [*exe, "env", entry.name, "--dry-run"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[0] == f"{entry.name}: environment {path} is out of date, {changed}", dry.stdout
    assert dry.stdout.splitlines()[1].startswith("would run: "), dry.stdout


def test_each_change_to_an_environments_recipe_is_named():
    was = environment.Recipe(("a==1", "b==2"), ("-e", "/x"), ("numpy>=1",), "3.11")
    now = environment.Recipe(("a==1", "b==3"), ("-e", "/x"), ("numpy>=1", "rich"), "3.12")
    assert environment.changes(was, now) == (
        "as it was built from other pins than its entry's now (was b==2; now b==3); as the suite's own "
        "dependencies changed since it was built (was nothing more; now rich); as it was made with Python 3.11, "
        "and this is Python 3.12"
    )
