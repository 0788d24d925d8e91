"""The Python half of scripts/offline-gpu-run.sh: what the shell cannot ask without importing
the package. Run with the installed gpt2_conformance on the path (the script sets PYTHONPATH).

    python gpu_run.py interpreter WHEELS_DIR     # this Python runs the wheels' project; exit 2 if not
    python gpu_run.py where SITE                 # the gpt2_conformance in use; exit 1 if not SITE's
    python gpu_run.py versions                   # versions of the packages the run depends on
    python gpu_run.py backends                   # every registered backend name, one a line
    python gpu_run.py probe DEVICE NAME          # one plan line: NAME, cpu pass, DEVICE pass, why
    python gpu_run.py facts OUT_DIR DEVICE       # OUT_DIR/facts.md: the issue's GPU facts, read off merged.json

A probe imports the backend's adapter (and so its framework): the script runs one probe per
backend, each in its own process under a timeout, so a framework that hangs or crashes at
import costs that backend only. Nothing here changes the machine.
"""

from __future__ import annotations

import json
import os
import re
import sys

# the distributions whose versions decide a GPU run; read from installed metadata, nothing imported
WATCHED = (
    "gpt2-conformance",
    "numpy",
    "pytest",
    "pytest-timeout",
    "pytest-xdist",
    "hypothesis",
    "pytest-benchmark",
    "torch",
    "jax",
    "jaxlib",
    "jax-cuda13-plugin",
    "jax-cuda12-plugin",
    "tensorflow",
    "transformers",
    "huggingface-hub",
    "tokenizers",
    "safetensors",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxscript",
    "keras",
    "keras-hub",
    "transformer-lens",
    "mlx",
    "matplotlib",
)


def interpreter(wheels: str) -> int:
    """Whether this interpreter can run the project in WHEELS_DIR: its Python version and every
    distribution the project requires (the install is --no-deps: they must be here already, or
    carried as wheels), read from the project wheel's metadata, and pip for the install. One line
    on stderr naming what is missing and the PYTHON variable that picks another, exit 2; or 0.
    It runs before anything is installed: a wrong interpreter otherwise shows as every clause's
    ERROR, a traceback cut mid-word in its reason."""
    import glob
    import zipfile
    from importlib import metadata

    try:
        from packaging.requirements import Requirement
        from packaging.specifiers import SpecifierSet
    except ImportError:  # pip vendors it; pip itself is checked below
        try:
            from pip._vendor.packaging.requirements import Requirement
            from pip._vendor.packaging.specifiers import SpecifierSet
        except ImportError:
            Requirement = SpecifierSet = None
    me = f"{sys.executable} (Python {sys.version.split()[0]})"
    fix = (
        "set PYTHON to an interpreter that has them, e.g. PYTHON=/path/to/venv/bin/python "
        "scripts/offline-gpu-run.sh WHEELS_DIR OUT_DIR"
    )
    if Requirement is None:
        print(f"offline-gpu-run: {me} has no pip, which installs the wheels: {fix}", file=sys.stderr)
        return 2
    wheels_here = sorted(glob.glob(os.path.join(wheels, "*.whl")))
    project = [w for w in wheels_here if os.path.basename(w).startswith("gpt2_conformance-")]
    if len(project) != 1:
        print(
            f"offline-gpu-run: {wheels} holds {len(project)} gpt2_conformance wheels, not one "
            "(scripts/prepare-gpu-wheels.sh makes the folder)",
            file=sys.stderr,
        )
        return 2
    with zipfile.ZipFile(project[0]) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = z.read(name).decode("utf-8", "replace")
    headers = [line.split(":", 1) for line in meta.split("\n\n", 1)[0].splitlines() if ":" in line]
    needs_python = next((v.strip() for k, v in headers if k == "Requires-Python"), "")
    if needs_python and sys.version.split()[0] not in SpecifierSet(needs_python):
        print(f"offline-gpu-run: {me}: gpt2-conformance needs Python {needs_python}; {fix}", file=sys.stderr)
        return 2
    carried = {re.sub(r"[-_.]+", "-", os.path.basename(w).split("-")[0]).lower() for w in wheels_here}
    lacking = []
    for k, v in headers:
        if k != "Requires-Dist":
            continue
        req = Requirement(v.strip())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's: a backend's framework, skipped by the plan where missing
        if re.sub(r"[-_.]+", "-", req.name).lower() in carried:
            continue
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            lacking.append(f"{req.name} (not installed)")
            continue
        if req.specifier and have not in req.specifier:
            lacking.append(f"{req.name} {have} (needs {req.specifier})")
    if lacking:
        print(f"offline-gpu-run: {me} lacks what gpt2-conformance needs: {', '.join(lacking)}; {fix}", file=sys.stderr)
        return 2
    print(f"python {me}: has every requirement of {os.path.basename(project[0])}")
    return 0


def where(site: str) -> int:
    import gpt2_conformance

    path = os.path.realpath(gpt2_conformance.__file__)
    print(f"gpt2_conformance {path}")
    if not path.startswith(os.path.realpath(site) + os.sep):
        print(
            f"error: the gpt2_conformance imported is not the one just installed in {site} "
            "(another copy shadows it on sys.path)",
            file=sys.stderr,
        )
        return 1
    return 0


def versions() -> int:
    import platform
    from importlib import metadata

    print(f"python {platform.python_version()} ({sys.executable})")
    for dist in WATCHED:
        try:
            print(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            print(f"{dist} -")
    return 0


def backends() -> int:
    from gpt2_conformance import registry

    print("\n".join(registry.available()))
    return 0


def probe(device: str, name: str) -> int:
    """One tab-separated line: name, the CPU pass's action, the DEVICE pass's action, the reason
    for each skip. An action is `run` or `skip`; the reason says why in words."""
    from gpt2_conformance import registry

    def line(cpu: str, dev: str, why: str) -> int:
        print("\t".join((name, cpu, dev, why.replace("\t", " ").replace("\n", " "))))
        return 0

    lacking = registry.missing_framework(name)
    if lacking:
        return line("skip", "skip", f"not installed on this machine: {lacking} is not importable")
    unbuilt = registry.unbuilt_environment(name)
    if unbuilt:  # a machine with no package index cannot build it
        return line("skip", "skip", f"not installed on this machine: {unbuilt}")
    try:
        factory = registry.resolve(name)
    except LookupError as exc:
        return line("skip", "skip", str(exc))
    except Exception as exc:  # noqa: BLE001  (its framework is there but the adapter does not import)
        return line("skip", "skip", f"the adapter does not import: {type(exc).__name__}: {str(exc)[:300]}")
    caps = getattr(factory, "capabilities", None)
    devices = tuple(getattr(caps, "devices", ()) or ())
    cpu = "run" if "cpu" in devices else "skip"
    reasons = [] if cpu == "run" else [f"cpu: the adapter claims devices {', '.join(devices) or 'none'} only"]
    if device == "cpu":
        dev = cpu
    elif device not in devices:
        dev = "skip"
        reasons.append(
            f"{device}: the adapter claims devices {', '.join(devices) or 'none'} only "
            f"({getattr(factory, '__name__', factory)}.capabilities)"
        )
    else:
        check = getattr(factory, "device_available", None)
        ok, why = check(device) if check else (False, "the adapter has no device_available check")
        dev = "run" if ok else "skip"
        if not ok:
            reasons.append(f"{device}: {why or 'not available on this machine'}")
    return line(cpu, dev, "; ".join(reasons))


# -- facts ------------------------------------------------------------------------------
def _columns(doc: dict, device: str) -> list[str]:
    return [c["label"] for c in doc.get("columns", []) if c.get("device") == device]


def _cell(doc: dict, clause: str, label: str) -> dict:
    for c in doc.get("clauses", []):
        if c["id"] == clause:
            return c["cells"].get(label) or {}
    return {}


def facts(out_dir: str, device: str) -> int:
    """facts.md: each GPU fact the issue names, with what this run shows for it (or why it
    shows nothing). It judges nothing itself: the verdicts are the suite's, merge's and the bench's."""
    path = os.path.join(out_dir, "merged", "merged.json")
    lines = [f"# GPU facts of this run (device {device})", ""]
    if device != "gpu":
        lines += [
            f"This run used `--device {device}`: a check of the script's own steps, **not a GPU run**. "
            "Every fact below is about GPU columns, so none is shown here.",
            "",
        ]
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        lines += [f"merged.json could not be read ({exc}): the merge step failed; see steps.tsv and logs/merge.log."]
        _write(out_dir, lines)
        return 1
    gpu = _columns(doc, device)
    lines += [f"Columns on {device}: {', '.join(gpu) or 'none'}.", ""]
    try:
        with open(os.path.join(out_dir, "plan.tsv"), encoding="utf-8") as f:
            plan = [ln.rstrip("\n").split("\t") for ln in f][1:]
        lines += [f"Not run on {device} (plan.tsv):", ""]
        lines += [
            f"- {row[0]}: {row[3] if len(row) > 3 else ''}" for row in plan if len(row) > 2 and row[2] != "run"
        ] or ["- none"]
        lines.append("")
    except OSError:
        pass

    lines += ["## 1. float32 h bit-identical between CPU and GPU (merge exits 1 if not)", ""]
    problems = doc.get("parity", {}).get("problems", [])
    lines += [f"- parity problem: {p}" for p in problems] or [
        "- no parity problem: every backend's float32 h digests agree across its columns"
        + ("" if device != "cpu" else " (only CPU columns here)")
    ]
    lines += ["", "## 2. TIED-LOGITS-FLOAT32 on the GPU (JAX's default matmul precision: TF32 or not)", ""]
    for label in gpu:
        cell = _cell(doc, "TIED-LOGITS-FLOAT32", label)
        tf32 = " (the errors fit TF32 inputs)" if "TF32" in cell.get("message", "") else ""
        lines.append(f"- {label}: {cell.get('status', 'absent')}{tf32}: {cell.get('message', '')[:300]}")
    lines += [
        "",
        "The built-in jax backend asks for precision=HIGHEST in its head (backends/jax/model.py), so its "
        "column tests full float32, not JAX's default; the default shows only in an implementation that keeps "
        "it (keras-hub-jax, where installed).",
    ]
    lines += [
        "",
        "## 3. A CUDA device-side assert costs its clause only",
        "",
        "Clauses whose message on a GPU column mentions a CUDA error (more than one BOUNDS clause per "
        "column would mean a poisoned CUDA context leaked into later tests):",
        "",
    ]
    cuda = [
        (label, c["id"], c["cells"][label].get("message", ""))
        for c in doc.get("clauses", [])
        for label in gpu
        if any(s in c["cells"].get(label, {}).get("message", "") for s in ("CUDA", "device-side", "cudaError"))
    ]
    lines += [f"- {label}: {cid}: {msg[:200]}" for label, cid, msg in cuda] or ["- none"]
    lines += [
        "",
        "## 4. Bench rows and their limits",
        "",
        "(the bench's limit is a host stream: a GPU row has no % of the limit, only its GB/s)",
        "",
    ]
    rows = [r for r in doc.get("bench", []) if r.get("device") == device]
    over = [r for r in rows if r.get("model_error") or (r.get("pct_of_limit") or 0) > 100]
    lines += [f"- {len(rows)} bench rows on {device}; {len(over)} above their limit"]
    lines += [f"  - over: {r['name']}: {r.get('model_error') or r.get('pct_of_limit')}" for r in over]
    prefill = [r for r in rows if str(r.get("group", "")).startswith("forward_prefill")]
    if prefill:
        lines += [
            "",
            "| backend | mode | shape | GB/s | limit GB/s | % of limit | limit |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in prefill:
            gbps, lim, pct = r.get("gbps"), r.get("limit_gbps"), r.get("pct_of_limit")
            lines.append(
                f"| {r['backend']} | {r.get('mode', '')} | {r['group'].split(' ', 1)[-1]} | "
                f"{_num(gbps)} | {_num(lim)} | {_num(pct)} | {r.get('limit_kind', '')} |"
            )
    _write(out_dir, lines)
    print("\n".join(lines))
    return 0


def _num(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _write(out_dir: str, lines: list[str]) -> None:
    with open(os.path.join(out_dir, "facts.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    commands = {
        "interpreter": (interpreter, 1),
        "where": (where, 1),
        "versions": (versions, 0),
        "backends": (backends, 0),
        "probe": (probe, 2),
        "facts": (facts, 2),
    }
    if not argv or argv[0] not in commands or len(argv) - 1 != commands[argv[0]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[argv[0]][0](*argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
