"""Where adapters come from: built-in names, the `gpt2_conformance.adapters` entry-point
group, or an explicit "package.module:factory". Resolved lazily: naming a backend imports
only that backend's module (and so only its framework)."""

from __future__ import annotations

import importlib
import os
import sys
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "gpt2_conformance.adapters"


def _builtin() -> dict[str, str]:
    from backends import BUILTIN

    return dict(BUILTIN)


def _plugins() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Every backend name: built-ins first, then installed plug-ins."""
    names = list(_builtin())
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
        raise ImportError(f"adapter {spec!r}: cannot import {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"adapter {spec!r}: {module_name!r} has no attribute {attr!r}") from None
    return obj


def resolve(name_or_spec: str):
    """The adapter factory for a backend name or a "module:factory" spec."""
    if ":" in name_or_spec:
        return load_object(name_or_spec)
    builtin = _builtin()
    if name_or_spec in builtin:
        return load_object(builtin[name_or_spec])
    plugins = _plugins()
    if name_or_spec in plugins:
        return plugins[name_or_spec].load()
    raise LookupError(f"unknown backend {name_or_spec!r}; available: {', '.join(available())} "
                      "(or pass --adapter package.module:factory)")


def missing_framework(name: str) -> str | None:
    """The first module a built-in backend needs that this environment lacks, else None."""
    import importlib.util

    from backends import REQUIRES

    return next((m for m in REQUIRES.get(name, ()) if importlib.util.find_spec(m) is None), None)
