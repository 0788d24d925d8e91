"""The suite's wheel, built from a copy of this checkout.

setuptools builds in the source tree (build/bdist.*, *.egg-info): two builds from the same folder at
once, or one beside `pip install -e` of it (the environments of tests/test_envs.py), delete each
other's files mid-build. Each test that needs the wheel builds it from its own copy of the files
git would ship (tracked, and untracked ones not ignored), so parallel test workers never share a
build folder and the repository is never written to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def source_files(root: Path = ROOT) -> list[str]:
    """The checkout's files and links as git sees them: tracked (and present) plus untracked, less ignored."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted({name for name in listed.split("\0") if name and os.path.lexists(root / name)})


def build_wheel(dest: Path, root: Path = ROOT, timeout: int = 900) -> Path:
    """Copy the checkout under dest/source, build its wheel into dest/dist; the wheel's path."""
    source = dest / "source"
    for name in source_files(root):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (root / name).is_symlink():  # conformance/golden/fixtures -> ../../fixtures: the same link
            os.symlink(os.readlink(root / name), target)
        else:
            shutil.copy2(root / name, target)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest / "dist"), str(source)],
        cwd=dest,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"pip wheel {source} exited {done.returncode}: {(done.stdout + done.stderr)[-3000:]}"
    (wheel,) = (dest / "dist").glob("gpt2_conformance-*.whl")
    return wheel
