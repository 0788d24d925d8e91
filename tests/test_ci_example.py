"""examples/github-actions/gpt2-conformance.yml: its shape (a backend x device matrix, each job
uploading its reports, one merge job writing the Markdown to the job summary), and its own
`run:` commands executed here for the numpy/cpu cell, then the merge job's commands on the
artifacts, with upload/download-artifact emulated as copies. A second cell (torch on a GPU
machine) is fabricated, since this machine has neither the time nor a GPU for it."""

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

from gpt2_conformance import results as res
from test_merge import suite_result, write

pytestmark = pytest.mark.slow  # replays the CI workflow's commands

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with transformers); "
                                          "the workflow cannot be parsed without it")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOW = os.path.join(ROOT, "examples", "github-actions", "gpt2-conformance.yml")
VENV_BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def workflow() -> dict:
    with open(WORKFLOW, encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_workflow_fans_out_and_merges(workflow):
    jobs = workflow["jobs"]
    matrix = jobs["conformance"]["strategy"]["matrix"]
    assert {"numpy", "torch"} <= set(matrix["backend"]) and matrix["device"] == ["cpu", "gpu"]
    uploads = [s for s in jobs["conformance"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert len(uploads) == 1 and "${{ matrix.backend }}-${{ matrix.device }}" in uploads[0]["with"]["name"]
    merge = jobs["merge"]
    assert merge["needs"] == "conformance" and merge["if"] == "always()"
    commands = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "gpt2-conformance merge artifacts --out-dir merged" in commands
    assert 'cat merged/merged.md >> "$GITHUB_STEP_SUMMARY"' in commands


def _substitute(text: str, matrix: dict) -> str:
    text = re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: matrix[m.group(1)], text)
    assert "${{" not in text, f"unhandled expression in {text!r}"
    return text.replace(".venv/bin/", VENV_BIN + "/")


def run_job(steps: list[dict], workdir, matrix: dict, store: dict, env: dict) -> list[tuple[str, int]]:
    """Each step in order: `run:` in bash as GitHub runs it (-eo pipefail), installs skipped
    (this venv has them), artifacts copied in and out of `store`. [(step, exit code)]."""
    codes = []
    for step in steps:
        uses = step.get("uses", "")
        if uses.startswith(("actions/checkout", "actions/setup-python")):
            continue
        if uses.startswith("actions/upload-artifact"):
            name = _substitute(step["with"]["name"], matrix)
            shutil.copytree(workdir / step["with"]["path"], store.setdefault(name, workdir.parent / "store" / name))
            continue
        if uses.startswith("actions/download-artifact"):
            for name, path in store.items():
                if fnmatch.fnmatch(name, step["with"]["pattern"]):
                    shutil.copytree(path, workdir / step["with"]["path"] / name)
            continue
        assert not uses, f"step uses {uses}, which this test does not emulate"
        if "pip install" in step["run"]:
            continue
        command = _substitute(step["run"], matrix)
        start = time.perf_counter()
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command], cwd=workdir,
                              env=env, capture_output=True, text=True, timeout=600)
        codes.append((step.get("name", command[:40]), done.returncode))
        print(f"{step.get('name', command[:40])}: exit {done.returncode} in {time.perf_counter() - start:.1f} s")
        assert done.returncode in (0, 1), f"step {step.get('name')!r} exited {done.returncode}: {done.stderr[-1500:]}"
    return codes


def test_workflow_commands_run_here_and_merge(workflow, tmp_path):
    env = dict(os.environ, GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    store: dict = {}
    cell = tmp_path / "numpy-cpu"
    cell.mkdir()
    codes = run_job(workflow["jobs"]["conformance"]["steps"], cell, {"backend": "numpy", "device": "cpu"}, store, env)
    assert [c for _, c in codes] == [0, 0], f"the numpy/cpu job's steps exited {codes}"
    report = json.loads((cell / "reports" / "numpy-cpu" / "gpt2-conformance-numpy-cpu.json").read_text())
    assert report["exit_code"] == 0 and report["parity"]["cases"]["h_prefill"]["max_abs_diff"] == 0

    # the torch/gpu cell, from another machine: same fingerprint (h is exact everywhere), one waiver
    gpu = tmp_path / "torch-gpu"
    fake = suite_result("torch", "gpu", {"INIT-WPE": res.WAIVED}, {"host": "gpu-runner", "device_name": "NVIDIA H200"},
                        fp=report["parity"])
    (gpu / "reports" / "torch-gpu").mkdir(parents=True)
    write(gpu / "reports" / "torch-gpu", "gpt2-conformance-torch-gpu.json", fake)
    shutil.copytree(gpu / "reports", store.setdefault("gpt2-conformance-torch-gpu", tmp_path / "store" / "torch-gpu"))

    merge_dir = tmp_path / "merge"
    merge_dir.mkdir()
    codes = run_job(workflow["jobs"]["merge"]["steps"], merge_dir, {}, store, env)
    assert codes[-1][1] == 0, f"the merge job's steps exited {codes}"
    summary = (tmp_path / "summary.md").read_text()
    assert "| Clause | numpy cpu | torch gpu |" in summary and "| INIT-WPE | PASS | waived |" in summary
    assert "| torch gpu | 0 [A] = | 0 [A] = |" in summary  # the parity table across the two machines
    assert "| forward_prefill B8-T1024-d768 | numpy | cpu |" in summary  # the bench table, from the bench step
    page = (merge_dir / "merged" / "scoreboard.html").read_text()
    assert 'data-column="numpy cpu"' in page and 'data-column="torch gpu"' in page and "<svg " in page
