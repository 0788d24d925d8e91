"""The shape of the package, checked from its imports (every import, lazy ones inside
functions included: a cycle hidden behind a lazy import is still a cycle).

The layers, lowest first; a module imports only from its own layer or a lower one:

    api        the adapter API a backend implements (adapter, backend entry, errors, validation)
    backends   the built-in adapters: they import the api and their framework, nothing else
    model      spec (the clauses), results (their verdicts), waivers, registry (the one reader of the backend list)
    runtime    what the suite runs on, the golden data it reads, and the wire to a process (wire)
    suite      the clause tests
    run        running a backend in child processes; its reports, waivers, parity; the upstream reproductions
    reports    merge, bench, and every `command` module (a CLI command is the top of its package)
    cli        the command line and the pytest entry point

and beyond the layers: nothing but the registry imports a backend, and no module reaches into
another module's private (_underscore) names."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "gpt2_conformance"
FOLDERS = {ROOT / "conformance": PACKAGE, ROOT / "backends": f"{PACKAGE}.backends"}

LAYERS = [
    ("api", [f"{PACKAGE}.api"]),
    ("backends", [f"{PACKAGE}.backends"]),
    ("model", [f"{PACKAGE}.spec", f"{PACKAGE}.results", f"{PACKAGE}.waivers", f"{PACKAGE}.registry"]),
    ("runtime", [f"{PACKAGE}.runtime", f"{PACKAGE}.golden", f"{PACKAGE}.wire"]),
    ("suite", [f"{PACKAGE}.suite"]),
    ("run", [f"{PACKAGE}.run", f"{PACKAGE}.upstream"]),
    ("reports", [f"{PACKAGE}.merge", f"{PACKAGE}.bench"]),
    ("cli", [f"{PACKAGE}.cli", f"{PACKAGE}.pytest_plugin", PACKAGE]),
]


def _module_name(path: pathlib.Path) -> str:
    for folder, name in FOLDERS.items():
        if folder in path.parents and not (folder == ROOT / "conformance" and "golden/fixtures" in str(path)):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join([name, *parts])
    raise ValueError(path)


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for folder in FOLDERS:
        for path in folder.rglob("*.py"):
            if "fixtures" in path.parts:
                continue
            out[_module_name(path)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import of our package in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                out.append((child, [], node.lineno) if child in MODULES else (base, [alias.name], node.lineno))
    return out


def _layer(module: str) -> int:
    if module.rpartition(".")[2] == "command" or module.endswith(".__main__"):
        return [n for n, _ in LAYERS].index("reports")
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


EDGES = {
    name: [(target, names, line) for target, names, line in _imports(name, path) if target in MODULES]
    for name, path in MODULES.items()
}


def test_every_module_is_in_a_layer():
    assert {m: _layer(m) for m in MODULES}


def test_no_import_against_the_layering():
    against = [
        f"{MODULES[src].relative_to(ROOT)}:{line} {src} ({LAYERS[_layer(src)][0]}) imports {dst} "
        f"({LAYERS[_layer(dst)][0]})"
        for src, edges in EDGES.items()
        for dst, _, line in edges
        if _layer(dst) > _layer(src)
    ]
    assert against == []


def test_only_the_registry_imports_a_backend():
    allowed = {f"{PACKAGE}.registry"}
    reaching = [
        f"{MODULES[src].relative_to(ROOT)}:{line} imports {dst}"
        for src, edges in EDGES.items()
        if src not in allowed and not src.startswith(f"{PACKAGE}.backends")
        for dst, _, line in edges
        if dst.startswith(f"{PACKAGE}.backends")
    ]
    assert reaching == []


def test_no_module_takes_another_modules_private_names():
    private = [
        f"{MODULES[src].relative_to(ROOT)}:{line} takes {dst}.{n}"
        for src, edges in EDGES.items()
        for dst, names, line in edges
        for n in names
        if n.startswith("_") and dst != src
    ]
    assert private == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, _, _ in EDGES.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert _cycles() == []


@pytest.mark.parametrize("kind", ["against the layering", "cycle"])
def test_the_checks_catch_what_they_are_for(kind, monkeypatch):
    """The two checks fail on a made-up violation (so a pass above is not an empty check)."""
    src, dst = f"{PACKAGE}.api.adapter", f"{PACKAGE}.run.runner"
    edges = {k: list(v) for k, v in EDGES.items()}
    edges[src].append((dst, [], 1))
    if kind == "cycle":
        edges[dst].append((src, [], 1))
        monkeypatch.setitem(globals(), "EDGES", edges)
        assert _cycles() != []
    else:
        monkeypatch.setitem(globals(), "EDGES", edges)
        with pytest.raises(AssertionError):
            test_no_import_against_the_layering()
