"""Where adapters come from, and the one place that reads the backend list:

- the built-in entries: gpt2_conformance/backends/__init__.py FOLDERS, each folder's BACKEND;
- installed packages' entries, the same Backend type: entry-point group `gpt2_conformance.backends`,
  each value a module holding BACKEND (name, adapter, requires, kind, waivers, bench modes);
- installed plug-ins that give a factory only: entry-point group `gpt2_conformance.adapters`;
- or an explicit "package.module:factory".

Resolved lazily: naming a backend imports only its adapter's module (and so only its framework);
reading the entries imports no framework at all."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from importlib.metadata import entry_points

from gpt2_conformance.api.backend import JUDGED, REFERENCE, Backend

ENTRY_POINT_GROUP = "gpt2_conformance.adapters"  # name = "module:factory"
BACKEND_ENTRY_POINT_GROUP = "gpt2_conformance.backends"  # name = "module holding BACKEND"
BACKENDS_PACKAGE = "gpt2_conformance.backends"
NUMPY_REFERENCE = "numpy"  # parity compares every backend with it; the bench's bars leave it out


@functools.cache
def builtin() -> dict[str, Backend]:
    """name -> entry for every backend with a registry entry: the built-ins in FOLDERS order,
    then the entries installed packages register (sorted by name)."""
    from gpt2_conformance.backends import FOLDERS

    packages = [f"{BACKENDS_PACKAGE}.{folder}" for folder in FOLDERS]
    packages += [ep.value for ep in sorted(entry_points(group=BACKEND_ENTRY_POINT_GROUP), key=lambda e: e.name)]
    out = {}
    for package in packages:
        entry = importlib.import_module(package).BACKEND
        if not isinstance(entry, Backend):
            raise TypeError(f"{package}.BACKEND is a {type(entry).__name__}, not a gpt2_conformance.api.backend.Backend")
        object.__setattr__(entry, "package", package)  # frozen: the folder is known only here
        if entry.name in out:
            raise ValueError(f"two backends are named {entry.name!r} ({out[entry.name].package}, {package})")
        out[entry.name] = entry
    return out


def entry(name: str) -> Backend | None:
    """The built-in entry called `name`, or the one whose adapter spec is `name`, else None."""
    entries = builtin()
    return entries.get(name) or next((e for e in entries.values() if e.adapter_spec == name), None)


def references() -> list[str]:
    return [n for n, e in builtin().items() if e.kind == REFERENCE]


def judged() -> list[str]:
    """The implementations we did not write: judged as they are, with waivers and a report each."""
    return [n for n, e in builtin().items() if e.kind == JUDGED]


def _plugins() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Every backend name: built-ins first, then installed plug-ins."""
    names = list(builtin())
    names += [n for n in sorted(_plugins()) if n not in names]
    return names


def load_object(spec: str):
    """Import "package.module:attribute" (attribute may be dotted)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"adapter {spec!r} must have the form package.module:factory")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # a console script does not see the current directory; `python -m` does
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"adapter {spec!r}: cannot import {module_name!r}: {exc}{_install_hint(exc)}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"adapter {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    return obj


def install_command(entry: Backend) -> str:
    """What installs a built-in backend's frameworks: its pyproject extra, else the suite itself."""
    return f"pip install 'gpt2-conformance[{entry.extra}]'" if entry.extra else "reinstall gpt2-conformance"


def _install_hint(exc: ImportError) -> str:
    """For a built-in backend's missing framework: the extra that installs it."""
    missing = (getattr(exc, "name", "") or "").split(".")[0]
    for e in builtin().values():
        if missing and missing in e.requires and e.extra:
            return f" ({install_command(e)})"
    return ""


def resolve(name_or_spec: str):
    """The adapter factory for a backend name or a "module:factory" spec, checked to say what it
    claims (a TypeError naming it if not: the suite cannot run an adapter whose claims it cannot
    read)."""
    return _claiming(name_or_spec, find(name_or_spec))


def load_adapter(spec: str):
    """The adapter factory an --adapter "module:factory" spec names, checked as resolve checks
    it; any other form is a ValueError (resolve would look it up as a backend name)."""
    return _claiming(spec, load_object(spec))


def find(name_or_spec: str):
    """The object a backend name or "module:factory" spec names, unchecked (`upstream` reads only
    its WAIVERS)."""
    if ":" in name_or_spec:
        return load_object(name_or_spec)
    found = builtin().get(name_or_spec)
    if found is not None:
        return load_object(found.adapter_spec)
    plugins = _plugins()
    if name_or_spec in plugins:
        return plugins[name_or_spec].load()
    raise LookupError(f"unknown backend {name_or_spec!r}; available: {', '.join(available())} "
                      "(or pass --adapter package.module:factory)")


def _claiming(name: str, factory):
    """`factory`, once it is known to say what it claims; a TypeError naming `name` if not."""
    from gpt2_conformance.api.adapter import capabilities_of

    try:
        capabilities_of(factory)
    except TypeError as exc:
        raise TypeError(f"adapter {name!r}: {exc}") from None
    return factory


def missing_framework(name: str) -> str | None:
    """The first module a built-in backend needs that this environment lacks, else None."""
    found = builtin().get(name)
    return next((m for m in (found.requires if found else ()) if importlib.util.find_spec(m) is None), None)


def requires(name: str, adapter_spec: str | None = None) -> list[str]:
    """The modules a backend runs on: a built-in's entry, else the adapter spec's module."""
    if adapter_spec:
        return [adapter_spec.partition(":")[0]]
    found = builtin().get(name)
    return list(found.requires) if found else []


def child_env(name: str) -> dict[str, str]:
    """The environment a built-in backend's suite children start with (its entry's child_env,
    CACHE resolved to its private cache folder); {} for any other backend."""
    from gpt2_conformance.api import machine
    from gpt2_conformance.api.backend import CACHE

    found = builtin().get(name)
    if found is None or not found.child_env:
        return {}
    folder = machine.private_cache_folder(f"{found.name}-cache") if any(CACHE in v for v in found.child_env.values()) else ""
    return {key: value.replace(CACHE, folder or "") for key, value in found.child_env.items()
            if CACHE not in value or folder}


def waivers_file(name_or_spec: str, factory=None) -> str | None:
    """A built-in's waiver file (its entry), else the file a factory names in its WAIVERS."""
    found = entry(name_or_spec)
    if found is not None:
        return found.waivers_path()
    return getattr(factory, "WAIVERS", None) if factory is not None else None


def upstream_dir(name_or_spec: str, factory=None) -> str | None:
    """The folder of a backend's upstream reproductions (`gpt2-conformance upstream`): `upstream/`
    beside its waiver file, whether that folder exists or not; None without a waiver file."""
    path = waivers_file(name_or_spec, factory)
    return os.path.join(os.path.dirname(os.path.abspath(path)), "upstream") if path else None
