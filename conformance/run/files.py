"""`gpt2-conformance run --onnx FILE [--engine E]` and `run --gguf FILE`: the file route's side of
the command line. It only hands over: the adapter is gpt2_conformance.backends.files (the
analysis of the file, the engines), named here by its spec string as any --adapter is named, and
the file reaches it through the environment the suite's child processes inherit (the variables
below, the same names as backends/files/__init__.py; tests/test_file_route.py checks they agree).

From there a file runs as any adapter does: the same scorecard, reports, --waivers, --case
replays and merge. The command's process imports the adapter first (run/command.py _waivers), so
a file the suite cannot understand is refused before any child starts: one line naming the file
and what is missing, exit 2. Clauses not claimed show why (the adapter's NOT_CLAIMED_WHY)."""

from __future__ import annotations

import os
import shlex

from gpt2_conformance import results as res

FILE_VARIABLE = "GPT2C_FILE"
ENGINE_VARIABLE = "GPT2C_FILE_ENGINE"
ENGINES = ("onnxruntime", "openvino", "tract")
ADAPTERS = {
    "onnx": "gpt2_conformance.backends.files.onnx_file:FileAdapter",
    "gguf": "gpt2_conformance.backends.files.gguf_file:FileAdapter",
}


def add_arguments(target, run) -> None:
    """--onnx and --gguf beside --backend/--adapter (one of them), and --engine."""
    target.add_argument(
        "--onnx", metavar="FILE", help="judge an exported GPT-2 ONNX file as it is (no adapter to write; docs/files.md)"
    )
    target.add_argument("--gguf", metavar="FILE", help="judge a GPT-2 GGUF file (llama.cpp) as it is, run by llama.cpp")
    run.add_argument(
        "--engine", choices=ENGINES, help="with --onnx: the engine that runs the file (default onnxruntime)"
    )


def kind(args) -> str | None:
    return "onnx" if getattr(args, "onnx", None) else "gguf" if getattr(args, "gguf", None) else None


def problem(args) -> str | None:
    """--engine without --onnx: one line, before anything runs."""
    if getattr(args, "engine", None) and kind(args) != "onnx":
        return "--engine names the engine of an --onnx file; it goes with --onnx only"
    return None


def prepare(args) -> str | None:
    """For --onnx/--gguf: the environment the adapter reads, args.adapter its spec; the run's
    name ("onnx-FILE NAME", "gguf-..."), or None for any other target."""
    which = kind(args)
    if which is None:
        return None
    path = os.path.abspath(getattr(args, which))
    os.environ[FILE_VARIABLE] = path
    engine = (args.engine or "onnxruntime") if which == "onnx" else "llama.cpp"
    if which == "onnx":
        os.environ[ENGINE_VARIABLE] = engine
    args.adapter = ADAPTERS[which]
    suffix = f"-{engine}" if which == "onnx" and engine != "onnxruntime" else ""
    return f"{which}-{os.path.basename(path)}{suffix}"


def target(args) -> str | None:
    """The command-line target that replays a file run (--onnx FILE [--engine E]), else None."""
    which = kind(args)
    if which is None:
        return None
    engine = f" --engine {args.engine}" if which == "onnx" and args.engine else ""
    return f"--{which} {shlex.quote(os.path.abspath(getattr(args, which)))}{engine}"


def explain_not_claimed(result: res.SuiteResult, factory) -> None:
    """Each NOT CLAIMED clause's message gets the adapter's reason for that claim, where it gives
    one (NOT_CLAIMED_WHY: requirement -> why), and the implementation line says what was found."""
    why = getattr(factory, "NOT_CLAIMED_WHY", None) or {}
    for clause in result.clauses:
        if clause.status == res.NOT_CLAIMED and clause.message in why:
            clause.message = f"{clause.message}: {why[clause.message]}"
    black_box = getattr(getattr(factory, "capabilities", None), "black_box", "")
    if black_box:
        result.environment["found"] = black_box
    own = own_tables(factory)
    if own:
        result.environment["found"] = f"{black_box}; {own}" if black_box else own
        result.environment["file_tables"] = own


def own_tables(factory) -> str:
    """One line: whether the file holds GPT-2's real tables, its own values against the golden
    data (the real 124M wpe, bit for bit, and every known real wte value within its printed
    precision); "" for an adapter that cannot read its file's tables (file_tables)."""
    read = getattr(factory, "file_tables", None)
    if read is None:
        return ""
    import numpy as np

    from gpt2_conformance.golden import data

    try:
        wte, wpe = read()
        golden = data.load()
    except (OSError, ValueError) as exc:
        return f"its own tables were not checked against the golden data ({type(exc).__name__}: {exc})"
    if wpe.shape != golden.wpe.shape:
        return f"its own tables are d = {wpe.shape[1]}: the golden data is GPT-2 124M's (d = {golden.wpe.shape[1]})"
    rows = int(np.count_nonzero((wpe != golden.wpe).any(axis=1)))
    wpe_line = (
        "its own wpe is GPT-2's real wpe, bit for bit"
        if rows == 0
        else f"its own wpe is not GPT-2's real wpe ({rows} of {len(wpe)} rows differ)"
    )
    agree = sum(abs(float(wte[k.row, k.col]) - float(k.value)) <= k.abs_tol for k in golden.wte_known)
    return f"{wpe_line}; its own wte agrees with {agree} of {len(golden.wte_known)} known real GPT-2 wte values"
