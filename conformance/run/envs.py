"""`gpt2-conformance env NAME`: builds the virtual environment of a backend whose frameworks cannot
share one with the others' (its registry entry's `environment`, gpt2_conformance.api.backend.Environment;
where it lives and when it is ready: gpt2_conformance.api.environment).

The suite's child processes already separate the judge from the judged (run/runner.py): the
parent reads the entries, schedules, waives and reports; only the children import the framework.
So such a backend's children run on its environment's python, the parent stays where it is, and
its report merges with the others as every report does.

One pip call installs the entry's pins with this suite itself, from where it is installed now (an
editable checkout stays editable, so the children run this checkout's suite and adapters), so the
resolver sees both at once; pip's own cache is re-used. A second call with the same recipe does
nothing and says it is up to date; one with another (a pin changed) installs into the same venv again.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
from dataclasses import asdict

from gpt2_conformance import registry
from gpt2_conformance import results as res
from gpt2_conformance.api.backend import Backend
from gpt2_conformance.api.environment import (
    ROOT_VARIABLE,
    STAMP,
    Recipe,
    build_command,
    changes,
    folder,
    python_of,
    recipe,
    stamped,
)
from gpt2_conformance.api.environment import (
    state as state_of,
)

__all__ = [
    "ROOT_VARIABLE",
    "STAMP",
    "build",
    "build_command",
    "child_python",
    "commands",
    "folder",
    "python_of",
    "recipe",
    "unbuilt",
]


def unbuilt(name: str) -> str | None:
    """Why `name` cannot run yet (its environment is missing or out of date), else None."""
    entry = registry.builtin().get(name)
    return None if entry is None else state_of(entry)[1]


def child_python(name: str) -> str:
    """The interpreter of `name`'s suite children."""
    entry = registry.builtin().get(name)
    return sys.executable if entry is None else state_of(entry)[0]


def commands(path: str, wanted: Recipe, venv_exists: bool) -> list[list[str]]:
    """The command lines that build (or bring up to date) the environment at `path`."""
    python = python_of(path)
    out = [] if venv_exists else [[sys.executable, "-m", "venv", path]]
    out.append([python, "-m", "pip", "install", "--disable-pip-version-check", *wanted.suite, *wanted.requirements])
    return out


def versions(python: str, dists: list[str]) -> dict[str, str]:
    """distribution -> version installed in the environment of `python` (its metadata, nothing imported)."""
    script = (
        "import json, sys\nfrom importlib import metadata\nout = {}\nfor d in sys.argv[1:]:\n"
        "    try:\n        out[d] = metadata.version(d)\n    except metadata.PackageNotFoundError:\n        pass\n"
        "print(json.dumps(out))"
    )
    try:
        done = subprocess.run([python, "-c", script, *dists], capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def requirement_names(entry: Backend) -> list[str]:
    """The distributions an environment's pins name."""
    assert entry.environment is not None
    return [r.split("==")[0].split("[")[0].strip() for r in entry.environment.requirements]


def build(name: str, dry_run: bool = False, out=print, lines=None) -> int:
    """Build or update `name`'s environment (or, dry_run, print what would run); an exit code.
    `lines`: each line the build commands print goes there instead of to the console (`run`
    shows the last one as its progress and keeps them all in its log)."""
    entry = registry.builtin().get(name)
    if entry is None:
        _error(f"unknown backend {name!r}; available: {', '.join(registry.available())}")
        return res.EXIT_USAGE
    if entry.environment is None:
        with_own = [n for n, e in registry.builtin().items() if e.environment is not None]
        _error(
            f"backend {name!r} runs in this environment, not one of its own "
            f"(those that do: {', '.join(with_own) or 'none'})"
        )
        return res.EXIT_USAGE
    path, wanted = folder(name), recipe(entry)
    if dry_run:
        return _build(name, path, wanted, True, out)
    # one build at a time per environment (two test processes, or two terminals, may ask at once):
    # the second waits, then finds it up to date
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(name, path, wanted, False, out, lines)


def _build(name: str, path: str, wanted: Recipe, dry_run: bool, out, lines=None) -> int:
    kept, exists = stamped(path), os.path.exists(python_of(path))
    if kept == wanted and exists:
        out(f"{name}: environment {path} is up to date (nothing to do)")
        return 0
    if kept is not None and exists:  # built before: say what changed, which is not always the pins
        out(f"{name}: environment {path} is out of date, {changes(kept, wanted)}")
    for cmd in commands(path, wanted, os.path.exists(python_of(path))):
        out(("would run: " if dry_run else "running: ") + shlex.join(cmd))
        if dry_run:
            continue
        code = _call(cmd, lines)
        if code != 0:
            _error(f"{name}: `{shlex.join(cmd)}` exited with {code}")
            return res.EXIT_FAIL
    if dry_run:
        return 0
    with open(os.path.join(path, STAMP), "w", encoding="utf-8") as f:
        json.dump(asdict(wanted), f, indent=1)
    out(f"{name}: environment {path} built; `gpt2-conformance run --backend {name}` runs its suite there")
    return 0


def _call(cmd: list[str], lines=None) -> int:
    """Run one build command: its output to the console, or each line to `lines`."""
    try:
        if lines is None:
            return subprocess.run(cmd).returncode
        out, err = subprocess.PIPE, subprocess.STDOUT
        with subprocess.Popen(cmd, stdout=out, stderr=err, text=True, errors="replace") as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines(line.rstrip("\n"))
        return proc.returncode
    except OSError as exc:  # its program cannot be started (a broken venv's python)
        (lines or print)(f"{cmd[0]} could not be started: {exc}")
        return 127


def size_of(path: str) -> int:
    """Bytes under `path` (an environment's folder), its links not followed."""
    total = 0
    for where, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(where, name)).st_size
            except OSError:
                pass
    return total


def _error(message: str) -> None:
    print(f"gpt2-conformance env: error: {message}", file=sys.stderr)


def add_parser(sub) -> None:
    parser = sub.add_parser("env", help="build the environment of a backend that runs in one of its own")
    parser.add_argument("name", help="the backend (its registry entry declares the environment)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")


def run(args) -> int:
    return build(args.name, args.dry_run)
