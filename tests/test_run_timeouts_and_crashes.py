"""What the documented commands promise, held to it with adapters that misbehave the way real
ones do: --timeout bounds the whole run, a crash in the last test invents no backend error, and
the wall time printed is the real one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from xml.etree import ElementTree as ET

import pytest

from gpt2_conformance.api import machine

TESTS_DIR = os.path.dirname(__file__)


def _cli(*args, cwd, timeout=600):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    return out.returncode, out.stdout + out.stderr, time.perf_counter() - start


@pytest.mark.slow  # a whole suite run whose head never returns
def test_timeout_bounds_a_run_whose_logits_hang(tmp_path):
    code, out, wall = _cli(
        "run", "--adapter", "helpers.bad_adapters:HangsInLogits", "--timeout", "5", "--report-dir", "r", cwd=tmp_path
    )
    assert code == 1, out[-3000:]
    report = json.loads(next((tmp_path / "r").glob("*.json")).read_text())
    # each hung test is ended at --timeout (not the default 60 s): measured per test, so a loaded
    # machine does not decide it; the run as a whole stays far under the ~650 s it took unbounded
    hung = [t for c in report["clauses"] for t in c["tests"] if "Timeout" in t["message"]]
    assert len(hung) >= 5 and all(t["duration"] < 5 + 5 for t in hung), [(t["nodeid"], t["duration"]) for t in hung]
    assert wall < 300, f"{wall:.0f} s with --timeout 5"
    tied = {c["id"]: c for c in report["clauses"] if c["group"] == "TIED"}
    message = tied["TIED-NO-BIAS"]["message"]
    assert tied["TIED-NO-BIAS"]["status"] == "FAIL" and "Timeout" in message, message
    assert report["summary"]["PASS"] >= 20, report["summary"]  # the clauses that read no logits still pass
    printed = float(re.search(r"skipped in ([0-9.]+) s", out).group(1))
    assert printed <= wall and printed >= wall - 5, (printed, wall)  # the time printed is the run's real one
    assert report["parity"].get("error", "").startswith("not computed"), report["parity"]


@pytest.mark.slow  # each logits test crashes its process and the runner restarts the rest
def test_a_crash_in_the_last_test_is_no_backend_error(tmp_path):
    code, out, _ = _cli(
        "run", "--adapter", "helpers.crashing_adapters:SegfaultInLogits", "--report-dir", "r", cwd=tmp_path
    )
    assert code == 1, out[-3000:]
    assert "ERROR:" not in out and "pytest exited" not in out, out[-3000:]
    report = json.loads(next((tmp_path / "r").glob("*.json")).read_text())
    assert report["error"] == "", report["error"]
    golden_logits = next(c for c in report["clauses"] if c["id"] == "GOLDEN-LOGITS")
    assert golden_logits["status"] == "FAIL" and "SIGSEGV" in golden_logits["message"], golden_logits
    assert report["summary"]["ERROR"] == 0
    junit = ET.parse(next((tmp_path / "r").glob("*.xml"))).getroot()
    assert junit.find("error") is None and junit.get("errors") == "0", ET.tostring(junit)[:500]
    assert "SIGSEGV" in report["parity"].get("error", "") or report["parity"].get("cases"), report["parity"]


MISSING_FRAMEWORK_ENTRY = """
from gpt2_conformance.api.backend import REFERENCE, Backend

BACKEND = Backend(name="needs-missing", adapter="adapter:Adapter", requires=({module!r},),
                  kind=REFERENCE, extra="missing-extra")
"""


def _entry_point_env(tmp_path, package: str, entry: str) -> dict:
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text(entry)
    info = tmp_path / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[gpt2_conformance.backends]\n{package} = {package}\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))


# a dotted requirement whose parent package is missing (iree.runtime without iree): find_spec raises
# for it, and `list --long` printed that traceback
@pytest.mark.parametrize("module", ["no_such_framework_gpt2c", "no_such_framework_gpt2c.runtime"])
def test_a_backend_whose_framework_is_missing_says_how_to_install_it(tmp_path, module):
    env = dict(
        _entry_point_env(tmp_path, "needs_missing", MISSING_FRAMEWORK_ENTRY.format(module=module)),
        **machine.child_temp_env(str(tmp_path / "tmp")),
    )  # where a run keeps its log folder
    run = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", "--backend", "needs-missing"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr == (
        f"gpt2-conformance: error: --backend 'needs-missing' needs {module}, which is "
        "not installed: pip install 'gpt2-conformance[missing-extra]'\n"
    ), run.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "list", "--long"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("needs-missing"))
    assert "not installed" in row and "gpt2-conformance[missing-extra]" in row, row
    assert not list((tmp_path / "tmp").glob("gpt2-conformance-*"))  # a refused command leaves no log behind


@pytest.mark.slow  # two whole runs at once
def test_report_and_log_names_are_safe_and_concurrent_runs_keep_their_own_logs(tmp_path):
    """Two runs at once of an --adapter spec (its ':' is not allowed in artifact names): each
    has its own log folder, printed; the report files use the same safe stem as the log."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])),
        **machine.child_temp_env(str(tmp_path / "tmp")),
    )  # the first run's log folder goes with the test
    cmd = [
        sys.executable,
        "-m",
        "gpt2_conformance.cli",
        "run",
        "--adapter",
        "helpers.mutants:FlatLogits",
        "--jobs",
        "1",
    ]
    procs = [
        subprocess.Popen(
            [*cmd, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path
        )
        for extra in ([], ["--report-dir", "r"])
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    logs = [re.search(r"^log: (.*)$", out, re.M).group(1) for out in outs]
    assert logs[0] != logs[1] and all(os.path.getsize(os.path.join(tmp_path, log)) > 0 for log in logs), logs
    stems = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert stems == [f"gpt2-conformance-helpers.mutants_FlatLogits-cpu.{ext}" for ext in ("json", "log", "md", "xml")]


def test_timeout_bounds_an_adapter_module_that_hangs_at_import(tmp_path):
    (tmp_path / "hangs_at_import.py").write_text("import time\n\ntime.sleep(3600)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), **machine.child_temp_env(str(tmp_path / "tmp")))
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", "--adapter", "hangs_at_import:Adapter", "--timeout", "2"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 1 and "took longer than --timeout 2 s" in out.stderr, out.stderr
    assert time.perf_counter() - start < 30
    assert not list((tmp_path / "tmp").glob("gpt2-conformance-*"))  # it ran nothing: no empty log folder
