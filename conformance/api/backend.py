"""What a built-in backend declares about itself: one entry, `BACKEND = Backend(...)`, in its
folder's __init__.py. The entry is plain data (importing it imports no framework), and
gpt2_conformance.registry is the one place that reads the entries; the CLI's `list`, `run
--backend all`, the bench, the third-party reports and the tests that check tox.ini, the
pyproject extras and the README against them all go through it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

CACHE = "{cache}"  # in a child_env value: the backend's private cache folder
REFERENCE, JUDGED = "reference", "judged"  # our own implementations; ones we did not write
KINDS = (REFERENCE, JUDGED)
WORKLOAD_KINDS = ("forward", "backward", "logits")  # what a bench mode can time (a decode step: forward + logits)


@dataclass(frozen=True)
class BenchMode:
    """One way the bench times a reference backend, declared once, in its registry entry: the
    bench module's table of modes and its check column are read from here."""

    about: str  # what the mode runs, one line (the bench report's mode column)
    check: str  # what it does about bad ids: "on (how)", or "OFF (comparison only)"
    kinds: tuple[str, ...] = ()  # the workload kinds it times (WORKLOAD_KINDS); () all of them


@dataclass(frozen=True)
class Environment:
    """A backend whose frameworks cannot share an environment with the others' (PaddleNLP pins
    huggingface_hub < 0.26, which transformers 5 cannot hold) runs its suite's child processes in
    a virtual environment of its own: `gpt2-conformance env NAME` builds it from these pins
    (gpt2_conformance.run.envs), with this suite installed into it from where it is installed now."""

    requirements: tuple[str, ...]  # pip requirement strings, each pinned (name==version)

    def __post_init__(self):
        if isinstance(self.requirements, str) or not self.requirements:
            raise ValueError(f"an Environment's requirements are a non-empty tuple of pins, got {self.requirements!r}")
        unpinned = [r for r in self.requirements if "==" not in r]
        if unpinned:
            raise ValueError(f"an Environment's requirements must each be pinned (name==version): {unpinned}")


@dataclass(frozen=True)
class Backend:
    name: str  # what users type: `--backend NAME`
    adapter: str  # "module:factory", the module relative to the backend's folder
    requires: tuple[str, ...]  # modules it imports: without one, `run --backend all` skips it, saying so
    kind: str  # REFERENCE or JUDGED (judged as it is, with waivers and a report of its own)
    # the pyproject extra that installs what it needs (pip install "gpt2-conformance[EXTRA]"); "" the core install
    extra: str
    waivers: str = ""  # the waiver file in the folder (JUDGED backends)
    wraps: str = ""  # what it runs, one line of Markdown (the README's backend table)
    # bench: its own hooks module in the folder ("bench") and its modes (name -> BenchMode), the
    # one place a mode is named and described; without modes, the bench times the adapter's
    # native hooks (native_bench in that module) and the Adapter API
    bench: str = ""
    bench_modes: dict[str, BenchMode] = field(default_factory=dict)
    # environment variables its suite's child processes start with where the user's environment
    # does not set them; CACHE in a value stands for this user's private folder for the backend
    # (machine.private_cache_folder; a variable naming it is left out where there is none)
    child_env: dict[str, str] = field(default_factory=dict)
    # an environment of its own for its suite's children (frameworks that conflict with the others')
    environment: Environment | None = None
    package: str = ""  # the folder as a module name; filled in by the registry

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"backend {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        module, sep, attr = self.adapter.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"backend {self.name!r}: adapter {self.adapter!r} must have the form module:factory")
        for mode, declared in self.bench_modes.items():
            if not isinstance(declared, BenchMode):
                raise TypeError(
                    f"backend {self.name!r}: bench mode {mode!r} is a {type(declared).__name__}, not a BenchMode"
                )
            unknown = set(declared.kinds) - set(WORKLOAD_KINDS)
            if unknown:
                raise ValueError(f"backend {self.name!r}: bench mode {mode!r} names unknown kinds {sorted(unknown)}")

    @property
    def adapter_spec(self) -> str:
        """The adapter as an importable "package.module:factory"."""
        module, _, attr = self.adapter.partition(":")
        return f"{self.package}.{module}:{attr}"

    @property
    def bench_module(self) -> str:
        return f"{self.package}.{self.bench}" if self.bench else ""

    def waivers_path(self) -> str | None:
        if not self.waivers:
            return None
        import importlib.util

        spec = importlib.util.find_spec(self.package)
        if spec is None or spec.origin is None:
            raise ImportError(f"backend {self.name!r}: package {self.package!r} not found, nor its waiver file")
        folder = os.path.dirname(spec.origin)
        return os.path.join(folder, self.waivers)

    def times(self, mode: str, kind: str) -> bool:
        """Whether bench mode `mode` times workloads of `kind` (modes it does not list: all)."""
        declared = self.bench_modes.get(mode)
        return declared is None or not declared.kinds or kind in declared.kinds

    def mode_table(self) -> tuple[dict[str, str], dict[str, str]]:
        """(mode -> what it runs, mode -> its check): a bench module's MODES and CHECK."""
        return {m: b.about for m, b in self.bench_modes.items()}, {m: b.check for m, b in self.bench_modes.items()}
