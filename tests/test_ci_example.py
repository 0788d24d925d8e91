"""examples/github-actions/gpt2-conformance.yml, as a user copies it into their own repository:
its shape (a device matrix, each job uploading its reports, one merge job writing the Markdown to
the job summary), then its steps replayed outside this repository.

The replay is the workflow's own `run:` commands, in bash as GitHub runs them, in a throwaway
repository of its own (a `git init`ed project with a tiny pyproject.toml package whose adapter
subclasses the NumPy reference, under the workflow's placeholder name GPT2C_ADAPTER). Checkout is
a clone of that repository, setup-python a folder holding only this interpreter's `python`, and
upload/download-artifact are copies. Each job makes its own fresh venv, as the workflow says.
One thing is substituted: GPT2C_SUITE, the suite's install source, becomes the wheel built from
this repository (the placeholder's git URL cannot be reached). Everything else the installs need
comes from pip's own configuration on this machine (its indexes and find-links), as in
test_wheel.py. No step sees this repository: not on PATH, not on PYTHONPATH, not in any variable.

The numpy/cpu cell is replayed whole; of the GPU cell (no GPU here) only its pins step, whose
constraints must lack the CPU torch pin and nothing else; its report is fabricated for the merge."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import gpt2_conformance
from gpt2_conformance import results as res
from helpers.reports import suite_result, write
from helpers.wheel import build_wheel

pytestmark = pytest.mark.slow  # builds the wheel and replays the CI workflow in fresh venvs

yaml = pytest.importorskip(
    "yaml", reason="PyYAML is not installed (it comes with transformers); the workflow cannot be parsed without it"
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOW = os.path.join(ROOT, "examples", "github-actions", "gpt2-conformance.yml")
PLACEHOLDER = (
    rf"gpt2-conformance @ git\+https://github\.com/OWNER/gpt2-conformance@v{re.escape(gpt2_conformance.__version__)}"
)

# the throwaway repository: the user's own package, its adapter where GPT2C_ADAPTER says
PROJECT_FILES = {
    "pyproject.toml": """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "my-package"
version = "0.0.1"
requires-python = ">=3.11"
dependencies = ["numpy"]

[tool.setuptools]
packages = ["my_package"]
""",
    "my_package/__init__.py": '"""A user\'s GPT-2 embedding."""\n',
    "my_package/gpt2_adapter.py": '''\
"""The user's adapter: here the NumPy reference under the user's own name."""

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


class Adapter(NumpyAdapter):
    pass
''',
    "README.md": "my-package: a project of its own, with a CI workflow copied from gpt2-conformance\n",
}


@pytest.fixture(scope="module")
def workflow() -> dict:
    with open(WORKFLOW, encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_workflow_fans_out_and_merges(workflow):
    env = workflow["env"]
    assert re.fullmatch(PLACEHOLDER, env["GPT2C_SUITE"]), env["GPT2C_SUITE"]  # a marked placeholder, ref pinned
    assert env["GPT2C_ADAPTER"] == "my_package.gpt2_adapter:Adapter"
    jobs = workflow["jobs"]
    assert jobs["conformance"]["strategy"]["matrix"]["device"] == ["cpu", "gpu"]
    steps = jobs["conformance"]["steps"]
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert len(uploads) == 1 and "${{ matrix.device }}" in uploads[0]["with"]["name"]
    commands = "\n".join(s.get("run", "") for s in steps)
    assert 'gpt2-conformance run --adapter "$GPT2C_ADAPTER" --device ${{ matrix.device }}' in commands
    assert '--no-deps "$GPT2C_SUITE"' in commands and " -e ." in commands  # the suite by name, the user's package
    pins = re.findall(r"pip install (?:.* )?-c (\S+)", commands)  # never a file of the checkout: the user's own
    assert pins and all(p.startswith('"$RUNNER_TEMP/') for p in pins), pins  # constraints.txt, if any, stays theirs
    merge = jobs["merge"]
    assert merge["needs"] == "conformance" and merge["if"] == "always()"
    commands = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "gpt2-conformance merge artifacts --out-dir merged" in commands
    assert 'cat merged/merged.md >> "$GITHUB_STEP_SUMMARY"' in commands


# -- the replay --------------------------------------------------------------------------------


def _run(cmd, cwd, env=None, timeout=300) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}: {(done.stdout + done.stderr)[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """(the suite's wheel, the throwaway repository, a folder holding only `python`), none of
    them in this repository."""
    tmp = tmp_path_factory.mktemp("ci-example")
    wheel = build_wheel(tmp)
    project = tmp / "my-package"
    for name, text in PROJECT_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    git = ["git", "-c", "user.name=CI example", "-c", "user.email=ci@example.invalid", "-c", "init.defaultBranch=main"]
    _run(git + ["init", "-q"], project)
    _run(git + ["add", "."], project)
    _run(git + ["commit", "-q", "-m", "my package and its adapter"], project)
    python_bin = tmp / "python" / "bin"  # setup-python: this interpreter (the base one, not this venv)
    python_bin.mkdir(parents=True)
    base = getattr(sys, "_base_executable", sys.executable)
    for name in ("python", "python3"):
        (python_bin / name).symlink_to(base)
    return wheel, project, python_bin


def _expand(text: str, matrix: dict) -> str:
    text = re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: matrix[m.group(1)], text)
    assert "${{" not in text, f"unhandled expression in {text!r}"
    return text


def _starting_environment() -> dict:
    """The environment this process started with, less what libraries imported since wrote into
    os.environ (executorch's and openvino's imports set OPENVINO_LIB_PATH to a folder of this
    repository's venv), which a runner never has."""
    try:
        with open("/proc/self/environ", "rb") as f:
            pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    except OSError:  # not Linux: what the process has now
        return dict(os.environ)
    return {os.fsdecode(k): os.fsdecode(v) for k, v in pairs}


def _env(workflow: dict, job: dict, outside, tmp, matrix: dict) -> dict:
    """A runner's environment: the workflow's and job's env (GPT2C_SUITE the wheel), RUNNER_TEMP,
    GITHUB_STEP_SUMMARY, PATH with setup-python's python first and nothing of this repository."""
    wheel, _, python_bin = outside
    # CMAKE_ARGS: this project's CI builds llama.cpp with a CMake file of this repository
    # (.ci/run); a runner has no such setting
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PWD", "OLDPWD", "CMAKE_ARGS"}
    started = _starting_environment()
    env = {k: v for k, v in started.items() if k not in drop and not k.startswith(("GPT2C_", "PYTEST_"))}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not os.path.abspath(p).startswith(ROOT)]
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    env.update(
        PATH=os.pathsep.join([str(python_bin)] + path),
        RUNNER_TEMP=str(runner_temp),
        CI="true",
        GITHUB_STEP_SUMMARY=str(tmp.parent / "summary.md"),
    )
    for scope in (workflow.get("env") or {}, job.get("env") or {}):
        env.update({k: _expand(str(v), matrix) for k, v in scope.items()})
    assert re.fullmatch(PLACEHOLDER, env["GPT2C_SUITE"])
    env["GPT2C_SUITE"] = f"gpt2-conformance @ {wheel.as_uri()}"  # the one substitution
    leaks = sorted(k for k, v in env.items() if ROOT in v)
    assert not leaks, f"these variables name the suite's repository: {leaks}"
    return env


def replay(workflow: dict, job_name: str, tmp, outside, matrix: dict, store: dict, until: str | None = None):
    """The job's steps in order, in tmp/work; a step without `if: always()` is skipped once one
    failed, as on GitHub (a failed step's output is printed). (work folder, environment,
    [(step name, exit code)]); stops after the step named `until`."""
    job = workflow["jobs"][job_name]
    tmp.mkdir()
    env = _env(workflow, job, outside, tmp, matrix)
    work = tmp / "work"
    work.mkdir()
    codes, failed = [], False
    for step in job["steps"]:
        uses, name = step.get("uses", ""), step.get("name", step.get("uses", ""))
        if failed and step.get("if") != "always()":
            continue
        if uses.startswith("actions/checkout"):
            _run(["git", "clone", "-q", str(outside[1]), str(work)], tmp)
        elif uses.startswith("actions/setup-python"):
            pass  # outside[2] is on PATH
        elif uses.startswith("actions/upload-artifact"):
            artifact = _expand(step["with"]["name"], matrix)
            if (work / step["with"]["path"]).exists():  # else, as on GitHub, a warning and no artifact
                shutil.copytree(
                    work / step["with"]["path"], store.setdefault(artifact, tmp.parent / "store" / artifact)
                )
        elif uses.startswith("actions/download-artifact"):
            for artifact, path in store.items():
                if fnmatch.fnmatch(artifact, step["with"]["pattern"]):
                    shutil.copytree(path, work / step["with"]["path"] / artifact)
        else:
            assert not uses, f"step uses {uses}, which this test does not emulate"
            command = _expand(step["run"], matrix)
            assert ROOT not in command
            start = time.perf_counter()
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command],
                cwd=work,
                env=dict(env, **{k: _expand(str(v), matrix) for k, v in (step.get("env") or {}).items()}),
                capture_output=True,
                text=True,
                timeout=900,
            )
            codes.append((name, done.returncode))
            print(f"{job_name} {matrix} {name}: exit {done.returncode} in {time.perf_counter() - start:.1f} s")
            if done.returncode:
                print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
            assert done.returncode in (0, 1), f"step {name!r} exited {done.returncode}: {done.stderr[-3000:]}"
            failed = failed or done.returncode != 0
        if name == until:
            break
    return work, env, codes


def _repository_constraints() -> list[str]:
    with open(os.path.join(ROOT, "constraints.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def test_cpu_cell_and_merge_replayed_in_a_throwaway_repository(workflow, outside, tmp_path):
    store: dict = {}
    cell, env, codes = replay(workflow, "conformance", tmp_path / "cpu", outside, {"device": "cpu"}, store)
    assert [c for _, c in codes] == [0, 0, 0, 0], f"the cpu cell's steps exited {codes}"
    pins = os.path.join(env["RUNNER_TEMP"], "gpt2c-constraints.txt")
    with open(pins, encoding="utf-8") as f:
        assert f.read().splitlines() == _repository_constraints()  # the wheel's copy is the repository's file
    where = _run(
        [
            str(cell / ".venv" / "bin" / "python"),
            "-c",
            "import gpt2_conformance, my_package; "
            "from importlib.metadata import version; print(gpt2_conformance.__file__); "
            "print(my_package.__file__); print(version('torch'))",
        ],
        cell,
        env,
    ).split()
    assert where[0].startswith(str(cell / ".venv")) and "site-packages" in where[0], where  # the wheel, installed
    assert os.path.realpath(where[1]) == os.path.realpath(cell / "my_package" / "__init__.py"), where  # editable
    torch_pin = next(line for line in _repository_constraints() if line.startswith("torch=="))
    assert where[2].split("+")[0] == torch_pin.split("==")[1], where  # GPT2C_EXTRAS installed under the pins
    assert not (cell / "constraints.txt").exists()

    reports = cell / "reports" / "cpu"
    (path,) = reports.glob("gpt2-conformance-*-cpu.json")
    report = json.loads(path.read_text())
    assert report["exit_code"] == 0 and report["parity"]["cases"]["h_prefill"]["max_abs_diff"] == 0
    assert ROOT not in path.read_text()
    backend = report["backend"]
    assert "my_package.gpt2_adapter" in backend, backend

    # the gpu cell, from another machine: same fingerprint (h is exact everywhere), one waiver
    gpu = tmp_path / "gpu-cell" / "reports" / "gpu"
    gpu.mkdir(parents=True)
    fake = suite_result(
        backend,
        "gpu",
        {"INIT-WPE": res.WAIVED},
        {"host": "gpu-runner", "device_name": "NVIDIA H200"},
        fp=report["parity"],
    )
    write(gpu, f"{path.name[: -len('-cpu.json')]}-gpu.json", fake)
    shutil.copytree(gpu.parent, store.setdefault("gpt2-conformance-gpu", tmp_path / "store" / "gpu"))

    merged, _, codes = replay(workflow, "merge", tmp_path / "merge", outside, {}, store)
    assert [c for _, c in codes] == [0, 0], f"the merge job's steps exited {codes}"
    summary = (tmp_path / "summary.md").read_text()
    print(summary)
    assert f"| Clause | {backend} cpu | {backend} gpu |" in summary, summary[:3000]
    assert "| INIT-WPE | PASS | waived |" in summary
    assert f"| {backend} gpu | 0 [A] = |" in summary  # the parity table across the two machines
    assert f"| forward_prefill B8-T1024-d768 | {backend} | cpu |" in summary  # the bench table, from the bench step
    page = (merged / "merged" / "scoreboard.html").read_text()
    assert f'data-column="{backend} cpu"' in page and f'data-column="{backend} gpu"' in page and "<svg " in page


def test_gpu_cell_drops_only_the_cpu_torch_pin(workflow, outside, tmp_path):
    _, env, codes = replay(
        workflow, "conformance", tmp_path / "gpu", outside, {"device": "gpu"}, {}, until="The suite's pins"
    )
    assert [c for _, c in codes] == [0], codes
    with open(os.path.join(env["RUNNER_TEMP"], "gpt2c-constraints.txt"), encoding="utf-8") as f:
        pins = f.read().splitlines()
    assert pins == [line for line in _repository_constraints() if not line.startswith("torch==")]
    assert len(pins) == len(_repository_constraints()) - 1
