"""Published artifacts carry no machine-local paths: the committed reports/ and what `run` writes
name the golden data, the report files and the adapter without the folders of the machine they
were made on (a reader elsewhere cannot open them, and they leak a user's layout)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# an absolute path under any of the usual roots of a machine's own folders
LOCAL_PATH = re.compile(r"(?<![\w.:/])/(?:work|tmp|home|root|Users|private|var/folders|opt|mnt)/[\w.\-/]+")


def _local_paths(text: str) -> list[str]:
    found = LOCAL_PATH.findall(text)
    for own in {str(ROOT), tempfile.gettempdir(), os.path.expanduser("~")}:
        if own != "/" and own in text:
            found.append(own)
    return sorted(set(found))


def test_committed_reports_carry_no_local_path():
    offenders = {}
    for path in (ROOT / "reports").rglob("*"):
        if path.suffix in {".md", ".html", ".json", ".xml"}:
            found = _local_paths(path.read_text(encoding="utf-8", errors="replace"))
            if found:
                offenders[str(path.relative_to(ROOT))] = found[:3]
    assert offenders == {}


def test_the_check_finds_a_local_path():
    assert _local_paths("golden data: shipped fixtures (/work/main/conformance/golden/fixtures)") != []
    assert _local_paths("see https://github.com/ml-explore/mlx/blob/v0.32.1/docs/src/usage/indexing.rst") == []


def test_a_run_writes_reports_without_local_paths(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", "--backend", "numpy", "--report-dir", "r", "--jobs", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for ext in ("json", "md", "xml"):
        text = (tmp_path / "r" / f"gpt2-conformance-numpy-cpu.{ext}").read_text()
        assert _local_paths(text) == [], (ext, _local_paths(text))
    report = json.loads((tmp_path / "r" / "gpt2-conformance-numpy-cpu.json").read_text())
    assert report["environment"]["golden_data"].startswith("shipped fixtures (sha256 "), report["environment"]
