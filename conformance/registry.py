"""Where adapters come from, and the one place that reads the backend list:

- the built-in entries: backends/__init__.py FOLDERS, each folder's BACKEND (or
  BACKENDS: one implementation on several frameworks, an entry each);
- installed packages' entries, the same Backend type: entry-point group `gpt2_conformance.backends`,
  each value a module holding BACKEND (name, adapter, requires, kind, waivers, bench modes): a
  package, or a plain module inside one (its names are then relative to that package);
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
from importlib.metadata import EntryPoint, entry_points

from gpt2_conformance.api.backend import JUDGED, REFERENCE, Backend

ENTRY_POINT_GROUP = "gpt2_conformance.adapters"  # name = "module:factory"
BACKEND_ENTRY_POINT_GROUP = "gpt2_conformance.backends"  # name = "module holding BACKEND"
BACKENDS_PACKAGE = "gpt2_conformance.backends"
NUMPY_REFERENCE = "numpy"  # parity compares every backend with it; the bench's bars leave it out


@functools.cache
def _entries() -> tuple[dict[str, Backend], dict[str, str], dict[str, object]]:
    """(name -> entry, name -> why a plug-in's entry cannot be used, name -> a plug-in entry's
    entry point, to name it in messages). A broken plug-in costs its own name only: every other
    backend, and `list`, work on, and naming it gives one line that says which entry point and
    distribution to fix."""
    from gpt2_conformance.backends import FOLDERS

    out: dict[str, Backend] = {}
    for folder in FOLDERS:  # ours: a broken built-in is the suite's bug, raised as it is
        module = importlib.import_module(f"{BACKENDS_PACKAGE}.{folder}")
        # one entry (BACKEND), or a family's entries with the framework as a parameter (BACKENDS)
        for found in getattr(module, "BACKENDS", None) or (module.BACKEND,):
            _add(out, f"{BACKENDS_PACKAGE}.{folder}", found)
    broken: dict[str, str] = {}
    origins: dict[str, object] = {}
    for ep in sorted(entry_points(group=BACKEND_ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            package, found = _plugin_entry(ep)
            _add(out, package, found)
            origins[found.name] = ep
        except (ImportError, TypeError, ValueError) as exc:
            broken[ep.name] = f"{_describe(ep)}: {exc}"
    return out, broken, origins


def _add(out: dict[str, Backend], package: str, found) -> None:
    if not isinstance(found, Backend):
        raise TypeError(f"{package}.BACKEND is a {type(found).__name__}, not a gpt2_conformance.api.backend.Backend")
    object.__setattr__(found, "package", package)  # frozen: the folder is known only here
    if found.name in out:
        raise ValueError(f"two backends are named {found.name!r} ({out[found.name].package}, {package})")
    out[found.name] = found


def _plugin_entry(ep) -> tuple[str, Backend]:
    """(the folder the entry's module names are relative to, the entry) for one installed
    package's entry point. It may name a package holding BACKEND or a plain module inside one:
    the folder is then the module's own package, where its adapter module sits beside it."""
    try:
        module = importlib.import_module(ep.value)
    except ImportError as exc:
        raise ImportError(
            f"cannot import {ep.value} ({exc}): reinstall the package that provides it, or fix its entry point"
        ) from None
    except Exception as exc:  # noqa: BLE001 - another package's module: whatever it raises is its own
        raise ImportError(f"importing {ep.value} raised {type(exc).__name__}: {exc}") from None
    found = getattr(module, "BACKEND", None)
    if found is None:
        raise TypeError(
            f"{ep.value} has no BACKEND: the entry point names a module holding "
            "BACKEND = gpt2_conformance.api.backend.Backend(...)"
        )
    package = ep.value if hasattr(module, "__path__") else ep.value.rpartition(".")[0]
    if not package:
        raise TypeError(
            f"{ep.value} is a top-level module, so its adapter {getattr(found, 'adapter', '')!r} has "
            "no folder to be found in: name a package, or a module inside one"
        )
    return package, found


def adapter_missing(name: str) -> str | None:
    """Why a plug-in's adapter module cannot be found, else None: a backend plug-in's (its
    BACKEND.adapter names a module relative to its folder) or an adapter plug-in's (its entry point
    names module:factory). Found, not imported: importing it imports its framework."""
    adapter_ep = _plugins().get(name)
    if adapter_ep is not None and name not in builtin():
        module = adapter_ep.value.partition(":")[0].strip()
        why = _not_found(module)
        return (
            f"{_describe(adapter_ep)}: its module {module} cannot be found ({why}): reinstall the package that "
            "provides it, or fix its entry point"
            if why
            else None
        )
    ep = _entries()[2].get(name)
    found = builtin().get(name)
    if ep is None or found is None:
        return None  # not a plug-in's entry: one of ours (tests/test_registry.py imports every one), or none
    module = found.adapter_spec.partition(":")[0]
    why = _not_found(module)
    if why is None:
        return None
    return (
        f"{_describe(ep)}: its adapter {found.adapter!r} is {module} ({why}): BACKEND.adapter names a "
        f"module:factory relative to {found.package}, the folder of the entry point's module"
    )


def _not_found(module: str) -> str | None:
    """Why `module` cannot be found (nothing of it imported but its parent packages), else None."""
    try:
        located, why = importlib.util.find_spec(module), "no such module"
    except (ImportError, ValueError) as exc:
        located, why = None, str(exc)
    return None if located is not None else why


def _describe(ep) -> str:
    """How a user finds the entry point: its group, its line and the distribution that installed it."""
    dist = getattr(ep, "dist", None)
    origin = f", installed by {dist.name} {dist.version}" if dist is not None else ""
    return f"plug-in {ep.name!r} (entry point {ep.group}: {ep.name} = {ep.value}{origin})"


def builtin() -> dict[str, Backend]:
    """name -> entry for every backend with a registry entry: the built-ins in FOLDERS order,
    then the entries installed packages register (sorted by name), the broken ones left out."""
    return _entries()[0]


def shipped() -> dict[str, Backend]:
    """name -> entry for this project's own backends (backends/__init__.py FOLDERS), not ones an
    installed package registers: what the README's table, tox's envs and the published reports list."""
    return {n: e for n, e in builtin().items() if e.package.startswith(BACKENDS_PACKAGE + ".")}


def broken() -> dict[str, str]:
    """name -> why, for each installed plug-in that cannot be used (one line naming its entry point)."""
    return {**_entries()[1], **_adapter_plugins()[1]}


def entry(name: str) -> Backend | None:
    """The built-in entry called `name`, or the one whose adapter spec is `name`, else None."""
    entries = builtin()
    return entries.get(name) or next((e for e in entries.values() if e.adapter_spec == name), None)


def references() -> list[str]:
    return [n for n, e in builtin().items() if e.kind == REFERENCE]


def judged() -> list[str]:
    """The implementations we did not write: judged as they are, with waivers and a report each."""
    return [n for n, e in builtin().items() if e.kind == JUDGED]


def _adapter_plugins() -> tuple[dict[str, EntryPoint], dict[str, str]]:
    """(name -> entry point, name -> why it cannot be used) of the group that gives a factory only."""
    found, broken_ones = {}, {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        module, sep, attr = ep.value.partition(":")
        if sep and module.strip() and attr.strip():
            found[ep.name] = ep
        else:
            broken_ones[ep.name] = f"{_describe(ep)}: the value must have the form package.module:factory"
    return found, broken_ones


def _plugins() -> dict[str, EntryPoint]:
    return _adapter_plugins()[0]


def plugin_value(name: str) -> str:
    """The "module:factory" an adapter plug-in's entry point names ("" for any other name)."""
    ep = _plugins().get(name)
    return ep.value if ep is not None else ""


def available() -> list[str]:
    """Every backend name: built-ins first, then installed plug-ins, then broken ones (refused by
    name, with why, wherever they are named)."""
    names = list(builtin())
    names += [n for n in sorted(_plugins()) if n not in names]
    names += [n for n in sorted(broken()) if n not in names]
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
    except TimeoutError:  # the caller's bound on a hanging import (run/command.py): not the module's error
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module: whatever its import raises is one line
        raise ImportError(f"adapter {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
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
        try:
            return plugins[name_or_spec].load()
        except (ImportError, AttributeError) as exc:
            raise ImportError(
                f"{_describe(plugins[name_or_spec])}: cannot load it ({exc}): reinstall the package "
                "that provides it, or fix its entry point"
            ) from None
    if name_or_spec in broken():
        raise LookupError(broken()[name_or_spec])
    raise LookupError(
        f"unknown backend {name_or_spec!r}; available: {', '.join(available())} "
        "(or pass --adapter package.module:factory)"
    )


def _claiming(name: str, factory):
    """`factory`, once it is known to say what it claims; a TypeError naming `name` if not."""
    from gpt2_conformance.api.adapter import capabilities_of

    try:
        capabilities_of(factory)
    except TypeError as exc:
        raise TypeError(f"adapter {name!r}: {exc}") from None
    return factory


def missing_framework(name: str) -> str | None:
    """The first module a built-in backend needs that this environment lacks, else None. A backend
    that runs in an environment of its own needs none here (unbuilt_environment says whether that
    one is ready)."""
    found = builtin().get(name)
    if found is not None and found.environment is not None:
        return None
    return next((m for m in (found.requires if found else ()) if not importable(m)), None)


def importable(module: str) -> bool:
    """Whether `module` can be found, nothing of it imported but its parent packages. A dotted name
    whose parent is missing (iree.runtime without iree) is not importable; find_spec raises for it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: set to None in sys.modules, which blocks its import
        return False


def unbuilt_environment(name: str) -> str | None:
    """For a backend that runs in an environment of its own (its entry's `environment`), one line
    naming the command that builds it while it is missing or out of date; else None."""
    found = builtin().get(name)
    if found is None or found.environment is None:
        return None
    from gpt2_conformance.api import environment

    return environment.state(found)[1]


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
    folder = (
        machine.private_cache_folder(f"{found.name}-cache") if any(CACHE in v for v in found.child_env.values()) else ""
    )
    return {
        key: value.replace(CACHE, folder or "")
        for key, value in found.child_env.items()
        if CACHE not in value or folder
    }


def waivers_file(name_or_spec: str, factory=None) -> str | None:
    """A built-in's waiver file (its entry), else the file a factory names in its WAIVERS."""
    found = entry(name_or_spec)
    if found is not None:
        return found.waivers_path()
    path = getattr(factory, "WAIVERS", None) if factory is not None else None
    if not path or os.path.isabs(path):
        return path
    # relative to the module that declares it, as the README's example writes it: the file sits
    # beside the adapter, whichever folder the command runs from
    declaring = next((c for c in getattr(factory, "__mro__", ()) if "WAIVERS" in vars(c)), factory)
    module = sys.modules.get(getattr(declaring, "__module__", ""), None)
    origin = getattr(module, "__file__", None)
    return os.path.join(os.path.dirname(os.path.abspath(origin)), path) if origin else path


def upstream_dir(name_or_spec: str, factory=None) -> str | None:
    """The folder of a backend's upstream reproductions (`gpt2-conformance upstream`): `upstream/`
    beside its waiver file, whether that folder exists or not; None without a waiver file."""
    path = waivers_file(name_or_spec, factory)
    return os.path.join(os.path.dirname(os.path.abspath(path)), "upstream") if path else None
