"""The causes behind a backend's waivers, their reproduction scripts, and running them.

A backend's causes are in `upstream/causes.toml` beside its waiver file (registry.upstream_dir):

    tracker = "https://github.com/huggingface/transformers/issues"   # where its drafts would go
    versions = ["transformers", "torch", "numpy"]   # distributions each draft lists

    [[cause]]
    id = "wpe-init-std"                 # the draft's and script's file name
    clauses = ["INIT-WPE"]              # the waived clauses this one cause explains
    title = "..."                       # the issue title
    script = "wpe_init_std.py"          # relative to upstream/ (a template may sit elsewhere)
    params = {}                         # {{NAME}} in the template -> value
    expect = "wpe std 0.02"             # in the script's stdout while the behaviour reproduces
    happens, expected, source, related, searched, size   # the draft's text (command.py)

    [[not_reported]]                    # waived clauses with nothing to report upstream
    clauses = ["BOUNDS-PAST-LENGTH"]
    reason = "..."

A script imports only the implementation's own library, its framework and numpy; it exits 1
while the deviation reproduces (printing `expect`) and 0 once it is fixed. Each runs in a fresh
interpreter, several at a time.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gpt2_conformance import registry, spec, waivers

CAUSES_FILE = "causes.toml"
REPRODUCES, FIXED, BROKEN, NOT_RUN = "reproduces", "no longer reproduces", "error", "not run"
TIMEOUT_S = 300
_PARAM = re.compile(r"\{\{([A-Z_]+)\}\}")


class CausesFileError(ValueError):
    """A causes.toml that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Cause:
    id: str
    clauses: tuple[str, ...]
    title: str
    script: str  # the template's path
    expect: str
    tracker: str
    versions: tuple[str, ...]
    params: dict = field(default_factory=dict)
    text: dict = field(default_factory=dict)  # happens, expected, source, related, searched, size, same_as

    def render(self) -> str:
        """The script as it is written out: the template with its {{PARAMS}} filled in."""
        with open(self.script, encoding="utf-8") as f:
            source = f.read()
        missing = sorted(set(_PARAM.findall(source)) - set(self.params))
        if missing:
            raise CausesFileError(f"cause {self.id!r}: template {os.path.basename(self.script)} needs {missing}")
        return _PARAM.sub(lambda m: str(self.params[m.group(1)]), source)


@dataclass(frozen=True)
class Causes:
    name: str  # the backend
    path: str  # its causes.toml
    waivers_path: str
    waivers: tuple[waivers.Waiver, ...]
    causes: tuple[Cause, ...]
    not_reported: tuple[tuple[tuple[str, ...], str], ...]  # (clauses, reason)

    def uncovered(self) -> list[str]:
        """Waived clauses that no cause and no not_reported entry explains."""
        covered = {c for cause in self.causes for c in cause.clauses}
        covered |= {c for clauses, _ in self.not_reported for c in clauses}
        return [w.clause for w in self.waivers if w.clause not in covered]


@dataclass
class Outcome:
    cause: Cause
    status: str  # REPRODUCES, FIXED, BROKEN or NOT_RUN
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    note: str = ""


def _strings(entry: dict, key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CausesFileError(f"{where}: {key} must be a string or a list of strings")
    return tuple(value)


def load(name: str, path: str, waivers_path: str) -> Causes:
    """The causes in `path` for backend `name`, checked against its waiver file."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CausesFileError(f"causes file {path}: {exc}") from exc
    waiver_list = waivers.load(waivers_path)
    waived = {w.clause for w in waiver_list}
    folder = os.path.dirname(path)
    causes, seen = [], set()
    for i, entry in enumerate(data.get("cause", [])):
        where = f"causes file {path}, cause {i + 1}"
        missing = [k for k in ("id", "clauses", "title", "script", "expect") if not entry.get(k)]
        if missing:
            raise CausesFileError(f"{where}: {', '.join(missing)} missing")
        if entry["id"] in seen or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", entry["id"]):
            raise CausesFileError(f"{where}: id {entry['id']!r} is repeated or not lowercase-with-dashes")
        seen.add(entry["id"])
        clauses = _strings(entry, "clauses", where)
        unknown = [c for c in clauses if c not in spec.BY_ID or c not in waived]
        if unknown:
            raise CausesFileError(f"{where}: {unknown} not waived in {waivers_path}")
        script = os.path.normpath(os.path.join(folder, entry["script"]))
        if not os.path.isfile(script):
            raise CausesFileError(f"{where}: script {entry['script']!r} not found")
        text = {k: entry[k] for k in ("happens", "expected", "size", "same_as", "searched") if k in entry}
        text["source"] = _strings(entry, "source", where)
        text["related"] = _strings(entry, "related", where)
        causes.append(
            Cause(
                entry["id"],
                clauses,
                entry["title"],
                script,
                entry["expect"],
                entry.get("tracker", data.get("tracker", "")),
                _strings(entry, "versions", where) or _strings(data, "versions", path),
                dict(entry.get("params", {})),
                text,
            )
        )
    not_reported = []
    for i, entry in enumerate(data.get("not_reported", [])):
        clauses = _strings(entry, "clauses", f"causes file {path}, not_reported {i + 1}")
        if not clauses or not entry.get("reason") or any(c not in waived for c in clauses):
            raise CausesFileError(f"causes file {path}, not_reported {i + 1}: needs waived clauses and a reason")
        not_reported.append((clauses, entry["reason"]))
    return Causes(name, path, waivers_path, tuple(waiver_list), tuple(causes), tuple(not_reported))


def find(name_or_spec: str, factory=None) -> tuple[str | None, str | None]:
    """(waiver file, causes file) of a backend name or adapter spec; None where there is none."""
    waivers_path = registry.waivers_file(name_or_spec, factory)
    folder = registry.upstream_dir(name_or_spec, factory)
    path = os.path.join(folder, CAUSES_FILE) if folder else None
    return waivers_path, path if path and os.path.isfile(path) else None


def for_backend(name: str) -> Causes | None:
    """A built-in (or registered) backend's causes, or None when it has none."""
    waivers_path, path = find(name)
    return load(name, path, waivers_path) if waivers_path and path else None


def environment() -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up lines are not the script's output
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_one(
    cause: Cause, path: str, timeout: float = TIMEOUT_S, env: dict | None = None, python: str | None = None
) -> Outcome:
    """Run the written script `path` in a fresh interpreter (`python`, default this one: a backend
    with an environment of its own runs its scripts on that one's); its status from the exit code."""
    try:
        done = subprocess.run(
            [python or sys.executable, path],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=os.path.dirname(path),
            env=env or environment(),
        )
    except subprocess.TimeoutExpired as exc:
        return Outcome(cause, BROKEN, None, _text(exc.stdout), _text(exc.stderr), f"timed out after {timeout:.0f} s")
    out = Outcome(cause, BROKEN, done.returncode, done.stdout, done.stderr)
    if done.returncode == 1 and cause.expect in done.stdout:
        out.status = REPRODUCES
    elif done.returncode == 0:
        out.status = FIXED
    else:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        out.note = (
            f"exit {done.returncode}"
            + ("" if done.returncode != 1 else f", {cause.expect!r} not in its output")
            + (f": {last}" if last else "")
        )
    return out


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def run_all(
    items: list[tuple[Cause, str]],
    jobs: int = 2,
    timeout: float = TIMEOUT_S,
    env: dict | None = None,
    python: str | None = None,
) -> list[Outcome]:
    """run_one for each (cause, written script), `jobs` at a time; results in the same order."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda item: run_one(item[0], item[1], timeout, env, python), items))


def write_scripts(causes: Causes, folder: str) -> list[tuple[Cause, str]]:
    """Each cause's rendered script as folder/<id>.py; (cause, absolute path) for run_all."""
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    items = []
    for cause in causes.causes:
        path = os.path.join(folder, f"{cause.id}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(cause.render())
        items.append((cause, path))
    return items


def fixed_clauses(outcomes: list[Outcome]) -> dict[str, str]:
    """Waived clause -> why its waiver is stale: every cause that explains the clause ran and no
    longer reproduces (a clause two causes explain stays waived while one still reproduces)."""
    by_clause: dict[str, list[Outcome]] = {}
    for o in outcomes:
        for clause in o.cause.clauses:
            by_clause.setdefault(clause, []).append(o)
    return {
        clause: "its upstream reproduction "
        + ", ".join(f"{o.cause.id}.py" for o in found)
        + " no longer reproduces (exit 0)"
        for clause, found in by_clause.items()
        if all(o.status == FIXED for o in found)
    }


def reproduce(name: str, jobs: int = 2, env: dict | None = None) -> list[Outcome]:
    """Write a built-in backend's scripts to a temporary folder and run them (none: [])."""
    import tempfile

    causes = for_backend(name)
    if causes is None or registry.missing_framework(name) or registry.unbuilt_environment(name):
        return []
    from gpt2_conformance.run import envs

    with tempfile.TemporaryDirectory(prefix="gpt2c-upstream-") as tmp:
        return run_all(write_scripts(causes, tmp), jobs, env=env, python=envs.child_python(name))
