"""scripts/offline-gpu-run.sh and scripts/prepare-gpu-wheels.sh, tested here, on a machine with
NO GPU. Nothing here is a GPU run, and nothing here shows that a GPU run would pass: what it
shows is the script's own logic, so that the first GPU run can fail only for GPU reasons.

- The GPU machine is stood in for by an "image": a fresh venv holding only the packages a bare
  Python with numpy, scipy, rich and the pytest family has (KINDS.md lists them; linked from this interpreter's own installs, as
  a machine image has them preinstalled; gpt2-conformance is not among them), pip's
  configuration switched off and every proxy pointed at a closed port, so that an install that
  tried any index would fail. The wheels come from prepare-gpu-wheels.sh, with an empty
  requirements file (its download half needs the network: not tested here).
- `--device gpu` on this CPU machine is the script's real GPU path: every backend the image
  lacks is skipped as not installed, numpy (CPU only) is skipped on the GPU with its claim as
  the reason and runs the parity pass on the CPU, the bench on the GPU skips numpy with its
  reason, nvidia-smi (absent: no driver) is skipped with that reason, merge still runs, and the
  script exits 3: not a GPU run.
- A PYTHON without the project's requirements is refused before anything runs.
- `--device cpu` is the dry run the issue asks for (the same steps on the CPU): a small plug-in
  adapter (the numpy reference claiming float32 at 768 only, so the suite is short) and one
  bench workload keep it cheap.
- The probe, the plan's one imported step, is also run here with --device gpu on the real
  backends: each GPU-only thing skips with its reason.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
IMAGE_PACKAGES = ("pip", "numpy", "pytest", "pytest-timeout", "hypothesis", "pytest-benchmark", "scipy", "rich")

TINY_ADAPTER = '''
import dataclasses
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


class TinyNumpy(NumpyAdapter):
    """The numpy reference claiming float32 at n_embd 768 only: a short suite for the dry run."""
    capabilities = dataclasses.replace(NumpyAdapter.capabilities, dtypes=("float32",), sizes=(768,),
                                       gradients=False, init=False)
'''


def _run(cmd, env=None, timeout=600, cwd=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    return out.returncode, out.stdout + out.stderr


def _offline_env(tmp, **extra) -> dict:
    """This environment without pip's configuration, PYTHONPATH or a virtualenv, every proxy at a
    closed port (any index reached would fail the install), and TMPDIR a folder of the test's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "GPT2C_FIXTURES")
    }
    closed = "http://127.0.0.1:9"
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        http_proxy=closed,
        https_proxy=closed,
        HTTP_PROXY=closed,
        HTTPS_PROXY=closed,
        no_proxy="",
        TMPDIR=str(tmp),
        **extra,
    )
    return env


# -- the fast tier: pins and the probe ----------------------------------------------------------
def test_carried_transformers_is_the_pinned_one_and_meets_the_hf_extra():
    """gpu-wheels.txt carries transformers because the machine's 5.17 is below the hf extra's
    bound; the version carried is constraints.txt's pin."""
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        pytest.skip("tomllib needs Python 3.11")
    with open(os.path.join(SCRIPTS, "gpu-wheels.txt")) as f:
        carried = {r.name: r for r in (Requirement(ln.split("#")[0].strip()) for ln in f if ln.split("#")[0].strip())}
    with open(os.path.join(ROOT, "constraints.txt")) as f:
        pins = {r.name: r for r in (Requirement(ln.split("#")[0].strip()) for ln in f if ln.split("#")[0].strip())}
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        hf = Requirement(tomllib.load(f)["project"]["optional-dependencies"]["hf"][0])
    assert set(carried) == {"transformers"}, carried
    version = next(iter(carried["transformers"].specifier)).version
    assert str(carried["transformers"].specifier) == str(pins["transformers"].specifier), (carried, pins)
    assert hf.name == "transformers" and version in hf.specifier and "5.17.0" not in hf.specifier, hf


def _probe(device, name):
    code, out = _run([sys.executable, os.path.join(SCRIPTS, "gpu_run.py"), "probe", device, name], timeout=300)
    assert code == 0, out
    line = next(ln for ln in out.splitlines() if ln.startswith(name + "\t"))
    return line.split("\t")


def test_probe_skips_a_cpu_only_backend_on_the_gpu_with_its_claim():
    assert _probe("gpu", "numpy") == [
        "numpy",
        "run",
        "skip",
        "gpu: the adapter claims devices cpu only (NumpyAdapter.capabilities)",
    ]
    assert _probe("gpu", "no-such-backend")[1:3] == ["skip", "skip"]


@pytest.mark.slow  # imports torch and transformers
def test_probe_on_a_cpu_machine_skips_every_gpu_pass_with_its_reason():
    """hf-transformers claims the CPU only: skipped on the GPU with the claim as the reason;
    torch claims the GPU but sees none here: skipped with torch's own words."""
    pytest.importorskip("torch")
    name, cpu, gpu, why = _probe("gpu", "torch")
    assert (cpu, gpu) == (
        "run",
        "skip",
    ) and why == "gpu: torch sees no GPU on this machine (torch.cuda.is_available() is False)", why
    pytest.importorskip("transformers")
    name, cpu, gpu, why = _probe("gpu", "hf-transformers")
    assert (cpu, gpu) == ("run", "skip") and "claims devices cpu only" in why, why


# -- the slow tier: the wheels and the whole script -----------------------------------------------
@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """WHEELS_DIR as prepare-gpu-wheels.sh makes it, the project's wheel only (empty requirements)."""
    tmp = tmp_path_factory.mktemp("gpu-wheels")
    (tmp / "none.txt").write_text("# nothing to download\n")
    code, out = _run(
        [
            "bash",
            os.path.join(SCRIPTS, "prepare-gpu-wheels.sh"),
            "--requirements",
            str(tmp / "none.txt"),
            str(tmp / "wheels"),
        ],
        env=dict(os.environ, PYTHON=sys.executable),
    )
    assert code == 0, out
    return tmp / "wheels", out


@pytest.mark.slow
def test_prepare_builds_the_projects_wheel_within_the_limit(wheels):
    folder, out = wheels
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 1 and re.fullmatch(r"gpt2_conformance-[^-]+-py3-none-any\.whl", names[0]), names
    assert sum(p.stat().st_size for p in folder.iterdir()) < 64 * 2**20
    assert re.search(r"1 wheels, [\d.]+ MiB \(limit 64 MiB\) in ", out), out


@pytest.mark.slow
def test_prepare_over_the_limit_fails_clearly_and_writes_nothing(tmp_path):
    (tmp_path / "none.txt").write_text("")
    target = tmp_path / "wheels"
    code, out = _run(
        [
            "bash",
            os.path.join(SCRIPTS, "prepare-gpu-wheels.sh"),
            "--requirements",
            str(tmp_path / "none.txt"),
            "--limit-mib",
            "0.5",
            str(target),
        ],
        env=dict(os.environ, PYTHON=sys.executable),
    )
    assert code == 1, out
    assert re.search(r"error: the wheels add up to [\d.]+ MiB, over the limit of 0.5 MiB", out), out
    assert "nothing was written to" in out and not target.exists(), out


def test_prepare_refuses_a_folder_that_holds_wheels(tmp_path):
    (tmp_path / "old-1.0-py3-none-any.whl").write_text("")
    code, out = _run(["bash", os.path.join(SCRIPTS, "prepare-gpu-wheels.sh"), str(tmp_path)])
    assert code == 2 and "is not empty" in out, out


def _image(tmp, packages=IMAGE_PACKAGES) -> str:
    """A fresh venv holding `packages` and their requirements, linked from this interpreter's
    installs (a machine image's preinstalled packages); its python."""
    from importlib import metadata

    from packaging.requirements import Requirement

    venv = tmp / "image"
    code, out = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert code == 0, out
    python = str(venv / "bin" / "python")
    code, site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    assert code == 0, site
    seen, todo = {}, list(packages)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if key in seen:
            continue
        seen[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if not req.marker or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    for dist in seen.values():
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}:
            src, dst = dist.locate_file(top), os.path.join(site.strip(), top)
            if os.path.exists(src) and not os.path.lexists(dst):
                os.symlink(src, dst)
    code, out = _run([python, "-c", "import gpt2_conformance"], env=_offline_env(tmp))
    assert code != 0 and "No module named 'gpt2_conformance'" in out, "the image must not hold the project: " + out
    return python


def _steps(out_dir) -> list[dict]:
    with open(os.path.join(out_dir, "steps.tsv"), newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _offline_run(tmp, wheels_dir, *options, budget=420, **env):
    python = _image(tmp)
    (tmp / "tmp").mkdir()
    out_dir = tmp / "out"
    code, out = _run(
        [
            "bash",
            os.path.join(SCRIPTS, "offline-gpu-run.sh"),
            "--budget",
            str(budget),
            *options,
            str(wheels_dir),
            str(out_dir),
        ],
        env=_offline_env(tmp / "tmp", PYTHON=python, **env),
        timeout=budget + 120,
        cwd=str(tmp),
    )
    leftovers = [p for p in os.listdir(tmp / "tmp") if p.startswith("gpt2c-offline-")]
    assert not leftovers, f"the temporary install was left behind: {leftovers}"
    code_after, after = _run([python, "-c", "import gpt2_conformance"], env=_offline_env(tmp))
    assert code_after != 0, "the run must leave the image's own environment as it was: " + after
    return code, out, out_dir


def test_an_interpreter_without_the_projects_requirements_is_refused_before_anything_runs(tmp_path, wheels):
    """PYTHON (default python3) without pytest-timeout: one line naming it and PYTHON, exit 2, and
    nothing written; it ran every step, and the suite's 40 clauses were ERROR (a traceback cut
    mid-word in their reason)."""
    python = _image(tmp_path, [p for p in IMAGE_PACKAGES if p != "pytest-timeout"])
    (tmp_path / "tmp").mkdir()
    code, out = _run(
        ["bash", os.path.join(SCRIPTS, "offline-gpu-run.sh"), str(wheels[0]), str(tmp_path / "out")],
        env=_offline_env(tmp_path / "tmp", PYTHON=python),
        cwd=str(tmp_path),
    )
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
    ).stdout.strip()
    # the list is the wheel's own requirements the image lacks: pytest-timeout among them
    lacking = re.fullmatch(
        rf"offline-gpu-run: {re.escape(python)} \(Python {re.escape(version)}\) lacks what "
        r"gpt2-conformance needs: (.*); set PYTHON to an interpreter that has them, e\.g\. "
        r"PYTHON=/path/to/venv/bin/python scripts/offline-gpu-run\.sh WHEELS_DIR OUT_DIR\n",
        out,
    )
    assert code == 2 and lacking and "pytest-timeout (not installed)" in lacking.group(1).split(", "), (code, out)
    assert not (tmp_path / "out").exists() and not os.listdir(tmp_path / "tmp")
    code, out = _run(
        ["bash", os.path.join(SCRIPTS, "offline-gpu-run.sh"), str(wheels[0]), str(tmp_path / "out")],
        env=_offline_env(tmp_path / "tmp", PYTHON="no-such-python3"),
        cwd=str(tmp_path),
    )
    assert (code, out) == (
        2,
        "offline-gpu-run: PYTHON=no-such-python3: no such interpreter; set PYTHON to the "
        "Python whose packages the run uses\n",
    ), out


@pytest.mark.slow
def test_gpu_path_on_a_cpu_machine_skips_with_reasons_and_still_merges(tmp_path, wheels):
    """--device gpu here: not a GPU run. Nothing can run on the GPU, so the GPU pass is skipped
    with each backend's reason; the parity pass runs numpy on the CPU; the bench on the GPU
    skips numpy with its reason (timing nothing: skipped, exit 3); merge and facts run; every step
    has its row, in order."""
    code, out, out_dir = _offline_run(tmp_path, wheels[0], "--device", "gpu")
    steps = _steps(out_dir)
    names = [s["step"] for s in steps]
    assert names[:3] == ["install", "where", "versions"] and names[3] == "nvidia-smi", names
    probes = [n for n in names if n.startswith("probe-")]
    assert "probe-numpy" in probes and "probe-torch" in probes and "probe-hf-transformers" in probes, names
    assert names[3 + 1 + len(probes) :] == ["suite-cpu-numpy", "suite-gpu", "bench-gpu", "merge", "facts"], names
    by = {s["step"]: s for s in steps}
    assert all(
        by[n]["status"] == "ok" for n in ("install", "where", "versions", "suite-cpu-numpy", "merge", "facts", *probes)
    ), steps
    assert (by["bench-gpu"]["status"], by["bench-gpu"]["exit"]) == ("skipped", "3"), by["bench-gpu"]
    assert "nothing was timed" in by["bench-gpu"]["note"], by["bench-gpu"]
    assert by["suite-gpu"]["status"] == "skipped" and "no backend can run on gpu" in by["suite-gpu"]["note"]
    if shutil.which("nvidia-smi") is None:  # no driver here: skipped with why; nothing ran on a GPU: exit 3
        assert (by["nvidia-smi"]["status"], by["nvidia-smi"]["note"]) == (
            "skipped",
            "nvidia-smi not found: no NVIDIA driver on this machine, so no GPU is expected (--device cpu "
            "checks the script's steps without one)",
        ), by["nvidia-smi"]
        assert code == 3 and out.rstrip().endswith(
            "offline-gpu-run: not a GPU run: no backend could run on the GPU here (plan.tsv says why for each)"
        ), out[-3000:]
    elif by["nvidia-smi"]["status"] != "ok":  # a driver that does not answer: failed, and the exit status says so
        assert code == 1 and "some steps did not succeed" in out, out[-3000:]
    assert "--no-index" in out and "--target" in out, out[:2000]

    with open(out_dir / "plan.tsv", newline="") as f:
        plan = {r["backend"]: r for r in csv.DictReader(f, delimiter="\t")}
    assert (plan["numpy"]["cpu"], plan["numpy"]["gpu"]) == ("run", "skip"), plan["numpy"]
    assert (plan["torch"]["cpu"], plan["torch"]["gpu"]) == ("skip", "skip"), plan["torch"]
    assert "not installed on this machine: torch is not importable" in plan["torch"]["reason"]
    assert "skip numpy on gpu: the adapter claims devices cpu only (NumpyAdapter.capabilities)" in out, out[-4000:]
    assert "skip tensorflow on gpu: not installed on this machine: tensorflow is not importable" in out

    doc = json.loads((out_dir / "merged" / "merged.json").read_text())
    assert [c["label"] for c in doc["columns"]] == ["numpy cpu"], doc["columns"]
    assert doc["columns"][0]["exit_code"] == 0 and doc["parity"]["problems"] == []
    for name in ("merged.md", "scoreboard.html"):
        assert (out_dir / "merged" / name).stat().st_size > 0
    bench = json.loads((out_dir / "bench-gpu" / "bench.json").read_text())
    skipped = bench["gpt2_conformance_bench"]["skipped"]
    assert "numpy has no GPU" in skipped.get("numpy", ""), bench
    facts = (out_dir / "facts.md").read_text()
    assert "Columns on gpu: none." in facts and "no parity problem" in facts, facts


@pytest.mark.slow
def test_cpu_dry_run_runs_every_step_in_order(tmp_path, wheels):
    """--device cpu: the dry run (not a GPU run). The first pass runs on the CPU, the parity pass
    is skipped as a repeat, the bench and merge run; exit 0 and the same files as a GPU run."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "tiny_numpy.py").write_text(TINY_ADAPTER)
    code, out, out_dir = _offline_run(
        tmp_path,
        wheels[0],
        "--device",
        "cpu",
        "--backends",
        "tiny_numpy:TinyNumpy,torch",
        "--bench-args",
        "--backend numpy --workload forward_decode",
        PYTHONPATH=str(tmp_path / "plugins"),
    )
    assert code == 0, out[-4000:]
    names = [s["step"] for s in _steps(out_dir)]
    assert names == [
        "install",
        "where",
        "versions",
        "probe-tiny_numpy_TinyNumpy",
        "probe-torch",
        "suite-cpu-tiny_numpy_TinyNumpy",
        "parity-pass-cpu",
        "bench-cpu",
        "merge",
        "facts",
    ], names
    assert "skip torch on cpu: not installed on this machine: torch is not importable" in out, out[-3000:]
    reports = list((out_dir / "suite-cpu" / "tiny_numpy_TinyNumpy").glob("*.json"))
    assert len(reports) == 1 and json.loads(reports[0].read_text())["exit_code"] == 0, reports
    doc = json.loads((out_dir / "merged" / "merged.json").read_text())
    assert [c["device"] for c in doc["columns"]] == ["cpu"] and doc["bench"], doc["columns"]
    # timed rows (whether one is above its limit is this machine's measurement, not this test's)
    assert {r["device"] for r in doc["bench"]} == {"cpu"} and all(r["median_s"] > 0 for r in doc["bench"]), doc["bench"]
    facts = (out_dir / "facts.md").read_text()
    assert "**not a GPU run**" in facts, facts
