"""What a user hands the suite, checked before any test runs. Each check raises InputError, one
line naming the input, the rule broken and what to do. Both routes call these same checks, each
with its own option names, so they say the same line: `gpt2-conformance run` (run/command.py)
exits 2 on it, the pytest route (pytest_plugin.py) raises pytest's usage error (exit 4).

Nothing the user supplied may reach a test: a test's error is the suite's own (ERROR), so a bad
checkpoint or waiver file found there would be blamed on the suite, after the whole run."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib.util
import os

SUITE = "gpt2_conformance.suite"


class InputError(ValueError):
    """An input that cannot be used: one line, the input, the rule and what to do."""


@dataclasses.dataclass(frozen=True)
class Options:
    """The option names of one route: each message names the option as the user typed it."""

    backend: str
    adapter: str
    checkpoint: str
    waivers: str
    seed: str
    thorough: str
    case: str


CLI = Options("--backend", "--adapter", "--checkpoint", "--waivers", "--seed", "--thorough", "--case")
PYTEST = Options(*(f"--gpt2c-{name[2:]}" for name in dataclasses.astuple(CLI)))


def seed(chosen: int | None, thorough: bool, opts: Options) -> None:
    if chosen is not None and not thorough:
        raise InputError(f"{opts.seed} replays a thorough run: add {opts.thorough}")


def checkpoint(path: str, opts: Options) -> None:
    """The checkpoint read as the GOLDEN clauses will read it, tables included: a file that is
    missing, of no format read here, truncated, corrupted or without GPT-2's wte and wpe is
    refused now, not found by five GOLDEN tests at the end of the run as the suite's own error."""
    from gpt2_conformance.golden import readers

    try:
        readers.load_checkpoint(path)
    except readers.CheckpointError as exc:
        raise InputError(
            f"{opts.checkpoint} {exc}; give a GPT-2 checkpoint with float32 wte and wpe "
            f"(.safetensors, torch .bin, TF model.ckpt, .npz, .gguf), or leave {opts.checkpoint} out "
            "to use the shipped golden data"
        ) from None


def suite_dir() -> str:
    spec = importlib.util.find_spec(SUITE)
    assert spec is not None and spec.origin is not None  # the suite is a package of this one
    return os.path.dirname(spec.origin)


def case(nodeid: str, opts: Options) -> None:
    """A case names a test of the suite: its file and its test function exist, found without
    collecting the suite (that imports the framework). The parameters in brackets exist only
    once the suite is collected: runtime/hooks.py checks those, with the same option name."""
    folder = suite_dir()
    path, _, test = nodeid.partition("::")
    name = test.split("[")[0]
    suite_file = os.path.join(folder, os.path.basename(path))
    if not path.endswith(".py") or not name or not os.path.isfile(suite_file):
        files = sorted(f for f in os.listdir(folder) if f.startswith("test_") and f.endswith(".py"))
        raise InputError(
            f"{opts.case} {nodeid!r}: not FILE::TEST of the suite, e.g. "
            f"'test_bounds.py::test_too_long_raises' (copy it from a report's repro line; files: "
            f"{', '.join(files)})"
        )
    with open(suite_file, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    tests = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    if name in tests:
        return
    close = difflib.get_close_matches(name, tests, n=1)
    raise InputError(
        f"{opts.case} {nodeid!r}: {os.path.basename(suite_file)} has no test {name!r}"
        + (f"; did you mean {close[0]!r}?" if close else f"; its tests: {', '.join(tests)}")
    )


def backend(name: str, opts: Options) -> None:
    """A backend name that can run here: registered, its plug-in usable, its framework installed
    (nothing imported: a built-in's framework is imported by the suite's own processes)."""
    from gpt2_conformance import registry

    broken = registry.broken()
    if name in broken:
        raise InputError(f"{opts.backend} {name!r}: {broken[name]}")
    if name not in registry.available():
        raise InputError(
            f"{opts.backend} {name!r}: unknown backend; available: {', '.join(registry.available())} "
            f"(or {opts.adapter} package.module:factory)"
        )
    unbuilt = registry.unbuilt_environment(name)
    if unbuilt:
        raise InputError(unbuilt)
    lacking = registry.missing_framework(name)
    if lacking:
        found = registry.entry(name)
        assert found is not None  # only a built-in entry lists frameworks (missing_framework)
        raise InputError(
            f"{opts.backend} {name!r} needs {lacking}, which is not installed: {registry.install_command(found)}"
        )
    missing = registry.adapter_missing(name)
    if missing:
        raise InputError(f"{opts.backend} {name!r}: {missing}")


def adapter(name_or_spec: str, spec_only: bool = False):
    """The factory a backend name or "module:factory" spec names, imported and checked to say
    what it claims (the message names the spec and why). `spec_only`: an --adapter, which must
    be a "module:factory" spec, never looked up as a backend name."""
    from gpt2_conformance import registry

    try:
        return registry.load_adapter(name_or_spec) if spec_only else registry.resolve(name_or_spec)
    except (ImportError, LookupError, ValueError, TypeError) as exc:
        raise InputError(str(exc)) from None


def waiver_list(name_or_spec: str, given: str | None, factory=None) -> list:
    """The waivers that apply: the file given, else the backend's own file, else the factory's
    WAIVERS (a relative path there is the declaring module's, gpt2_conformance.registry)."""
    from gpt2_conformance import registry, waivers

    path = given or registry.waivers_file(name_or_spec, factory)
    try:
        return waivers.load(path) if path else []
    except waivers.WaiverFileError as exc:
        raise InputError(str(exc)) from None
