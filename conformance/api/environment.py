"""Where a backend's environment of its own lives and whether it is ready (the entry's
`environment`, gpt2_conformance.api.backend.Environment); building it is
gpt2_conformance.run.envs (`gpt2-conformance env NAME`).

An environment is a venv at <root>/NAME, the root being $GPT2_CONFORMANCE_ENVS where set, else
gpt2-conformance/envs in the user's cache folder ($XDG_CACHE_HOME or ~/.cache). A stamp file in it
records the recipe it was built from; it is ready while that recipe is the entry's now.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from gpt2_conformance.api.backend import Backend

ROOT_VARIABLE = "GPT2_CONFORMANCE_ENVS"
STAMP = "gpt2-conformance-env.json"  # in the venv's folder: the recipe it was built from
DISTRIBUTION = "gpt2-conformance"


@dataclass(frozen=True)
class Recipe:
    """What an environment is built from: equal recipes, the same environment."""

    requirements: tuple[str, ...]  # the entry's pins
    suite: tuple[str, ...]  # how pip installs this suite: ("-e", folder), (wheel,) or ("gpt2-conformance==V",)
    suite_dependencies: tuple[str, ...]  # the suite's own (installed metadata), so a new one rebuilds
    python: str  # major.minor of the interpreter the venv is made from


def root() -> str:
    """The folder of every backend's environment."""
    if os.environ.get(ROOT_VARIABLE):
        return os.path.abspath(os.environ[ROOT_VARIABLE])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "gpt2-conformance", "envs")


def folder(name: str) -> str:
    return os.path.join(root(), name)


def python_of(path: str) -> str:
    return os.path.join(path, "Scripts", "python.exe") if os.name == "nt" else os.path.join(path, "bin", "python")


def build_command(name: str) -> str:
    return f"gpt2-conformance env {name}"


def installed():
    """The suite's distribution as pip installed it (the one with an INSTALLER record), not the
    egg-info an editable install's build leaves in the checkout, which sys.path finds first when
    the current directory is the checkout (its requirements are the working tree's, not what is
    installed). Raises PackageNotFoundError where the suite is not installed."""
    from importlib import metadata

    found = list(metadata.distributions(name=DISTRIBUTION))
    if not found:
        raise metadata.PackageNotFoundError(DISTRIBUTION)
    return next((d for d in found if d.read_text("INSTALLER") is not None), found[0])


def suite_source() -> tuple[str, ...]:
    """How pip installs the suite that runs now into another environment: its editable checkout
    (-e FOLDER), the folder or archive it was installed from (PEP 610 direct_url.json), else the
    same version from the index."""
    from importlib import metadata

    try:
        dist = installed()
    except metadata.PackageNotFoundError:  # run from a checkout never installed: this checkout, editable
        return ("-e", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raw = dist.read_text("direct_url.json")
    direct = json.loads(raw) if raw else {}
    url = direct.get("url", "")
    if url.startswith("file://"):
        path = url[len("file://") :]
        return ("-e", path) if direct.get("dir_info", {}).get("editable") else (path,)
    return (f"{DISTRIBUTION}=={dist.version}",)


def recipe(entry: Backend) -> Recipe:
    from importlib import metadata

    if entry.environment is None:
        raise ValueError(f"backend {entry.name!r} runs in this environment: it declares no environment of its own")
    try:
        deps = tuple(installed().requires or ())
    except metadata.PackageNotFoundError:
        deps = ()
    return Recipe(
        entry.environment.requirements,
        suite_source(),
        tuple(d for d in deps if "extra ==" not in d),
        f"{sys.version_info.major}.{sys.version_info.minor}",
    )


def stamped(path: str) -> Recipe | None:
    try:
        with open(os.path.join(path, STAMP), encoding="utf-8") as f:
            kept = json.load(f)
        return Recipe(
            tuple(kept["requirements"]), tuple(kept["suite"]), tuple(kept["suite_dependencies"]), str(kept["python"])
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None


def state(entry: Backend) -> tuple[str, str | None]:
    """(the python `entry`'s suite children run on, why they cannot yet: one line naming the
    command that builds its environment, or None). A backend without an environment of its own:
    this interpreter, None."""
    if entry.environment is None:
        return sys.executable, None
    name = entry.name
    path = folder(name)
    python = python_of(path)
    kept = stamped(path)
    if kept is None or not os.path.exists(python):
        return python, (
            f"backend {name!r} runs in an environment of its own, which is not built ({path}): {build_command(name)}"
        )
    wanted = recipe(entry)
    if kept != wanted:
        why = changes(kept, wanted)
        return python, f"backend {name!r}: its environment ({path}) is out of date, {why}: {build_command(name)}"
    return python, None


def changes(kept: Recipe, wanted: Recipe) -> str:
    """What differs between the recipe an environment was built from and the one it needs now, in
    one clause: the pins are one of four things that can change, not the only one."""
    out = []
    if kept.requirements != wanted.requirements:
        out.append(
            f"as it was built from other pins than its entry's now ({_differ(kept.requirements, wanted.requirements)})"
        )
    if kept.suite != wanted.suite:
        out.append(
            f"as the suite was installed into it from {' '.join(kept.suite)}, "
            f"and runs from {' '.join(wanted.suite)} now"
        )
    if kept.suite_dependencies != wanted.suite_dependencies:
        out.append(
            "as the suite's own dependencies changed since it was built "
            f"({_differ(kept.suite_dependencies, wanted.suite_dependencies)})"
        )
    if kept.python != wanted.python:
        out.append(f"as it was made with Python {kept.python}, and this is Python {wanted.python}")
    return "; ".join(out) or "as its recipe changed"


def _differ(was: tuple[str, ...], now: tuple[str, ...]) -> str:
    """ "was A, B; now C": the entries one side has and the other lacks."""
    gone, new = [x for x in was if x not in now], [x for x in now if x not in was]
    if not gone and not new:
        return "the same, in another order"
    return f"was {', '.join(gone) or 'nothing more'}; now {', '.join(new) or 'nothing more'}"
