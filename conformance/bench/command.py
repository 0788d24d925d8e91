"""`gpt2-conformance bench`: which implementation is fastest on this machine, and by how much;
and, with --against, whether a change made one slower (a gate for CI).

    bench [--quick] [--backend NAME ...] [--workload W ...] [--mode M ...] [--out-dir DIR]
    bench --adapter NEW --against BASE [--against-python PY] [--workload W] --fail-above PCT

Every backend (or side of the gate) gets a worker process of its own for the whole run
(worker.py); the parent gives them turns, round by round (session.py), and ranks them by ratios
of blocks timed in the same round (ranking.py). Outputs (each on its own: one that fails costs
itself and a line): the console table, bench.json (pytest-benchmark's layout plus "ranking"),
bench.md and bench.png.

Exit codes: 0 done (the gate passed); 1 the gate found NEW slower, or a row failed; 2 bad
command line; 3 nothing was timed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time

from gpt2_conformance.api import machine
from gpt2_conformance.bench import compare, gate, session, summary, timing, workloads
from gpt2_conformance.bench.benchmark_json import BenchmarkJSON
from gpt2_conformance.bench.plot import RatioPlot
from gpt2_conformance.bench.report import ConsoleTable, MarkdownReport
from gpt2_conformance.bench.worker import LIMIT
from gpt2_conformance.merge.inputs import load_bench
from gpt2_conformance.merge.model import MergeError
from gpt2_conformance.results import EXIT_NOTHING_CHECKED
from gpt2_conformance.wire import route as wire_route

ROUNDS = {"quick": 20, "gate": 40, "full": 8}
# a worker's memory at its largest, about: what every implementation's workers held at once at the
# decode step, per worker (the measurement is the ranking record indexed in reports/bench/README.md)
WORKER_BYTES = 1.25 * 2**30
BLOCK_S, LEAD_IN_S = 0.08, 0.02


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="rank the installed implementations by speed on the same work, with "
        "confidence intervals; or gate a change against a baseline",
    )
    p.add_argument(
        "--backend",
        action="append",
        help="backend to time (repeatable): a registered name (`gpt2-conformance list`), a "
        "package.module:factory spec, or `all` (default: the reference backends installed)",
    )
    p.add_argument(
        "--exec",
        action="append",
        dest="exec_commands",
        metavar='"CMD [ARGS]"',
        help="also time a program speaking the wire protocol (repeatable; docs/any-language.md)",
    )
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument(
        "--quick",
        action="store_true",
        help="each workload at its standard shape only (default workloads: the decode step and the "
        "prefill forward), each backend in its default mode; about a minute on 2 cores",
    )
    p.add_argument(
        "--workload",
        action="append",
        dest="workloads",
        choices=workloads.NAMES,
        help="only this workload (repeatable; default: all, or the decode step and the prefill "
        "forward with --quick and --against)",
    )
    p.add_argument(
        "--mode",
        action="append",
        dest="modes",
        help="only this mode (repeatable; default: every mode, or with --quick and --against the "
        "implementation as its adapter runs it)",
    )
    p.add_argument(
        "--sizes",
        type=_sizes,
        metavar="D[,D...]",
        help="n_embd values for the prefill shapes (default: 768,1024,1280,1600; not with --quick)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help=f"turns per row and workload (default {ROUNDS['quick']} with --quick, {ROUNDS['gate']} with "
        f"--against, {ROUNDS['full']} otherwise)",
    )
    p.add_argument(
        "--processes",
        type=int,
        metavar="P",
        help="worker processes per implementation: a difference must hold in every process pair to be "
        "called significant (default 2 with --quick and --against; 1 for a full run, whose every "
        "mode of every workload would need twice the memory and time)",
    )
    p.add_argument("--out-dir", default="bench-results", help="where bench.json, bench.md and bench.png go")
    p.add_argument(
        "--compare",
        metavar="BASELINE.json",
        help="print each row's median beside a stored run's (advisory: not timed together)",
    )
    p.add_argument(
        "--adapter",
        metavar="NEW",
        help="with --against: the implementation under test (a backend name or package.module:factory)",
    )
    p.add_argument(
        "--against",
        metavar="BASE",
        help="the gate: time NEW and BASE in turns in this run and exit 1 "
        "if NEW is slower by more than --fail-above with 95%% confidence",
    )
    p.add_argument(
        "--against-python",
        metavar="PYTHON",
        help="run BASE's worker with this interpreter (another checkout's venv, as asv builds both "
        "commits); it must have gpt2-conformance installed",
    )
    p.add_argument("--fail-above", type=float, default=10.0, metavar="PCT", help="the gate's threshold (default 10)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a worker may take to answer one command")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: n_embd values are positive integers, comma-separated")
    return tuple(dict.fromkeys(sizes))


def backend_names(requested: list[str] | None) -> list[str]:
    """--backend values, `all` expanded to every installed backend; an unknown name raises
    LookupError."""
    from gpt2_conformance import registry

    if not requested:  # the reference backends installed
        return [n for n in registry.references() if registry.missing_framework(n) is None]
    names = []
    for name in requested:
        if name == "all":
            names += [b for b in registry.available() if registry.missing_framework(b) is None]
        elif ":" in name or name in registry.available():
            names.append(name)
        else:
            raise LookupError(
                f"--backend {name!r}: unknown backend; available: {', '.join(registry.available())}, "
                "all, or package.module:factory"
            )
    return list(dict.fromkeys(names))


def bad_args(args) -> str | None:
    """What is wrong with the command line (one line), found before any worker starts."""
    from gpt2_conformance import registry

    if (args.adapter is None) != (args.against is None):
        return "--adapter and --against go together: --adapter NEW --against BASE"
    if args.against and args.backend:
        return "--backend does not apply to the gate: it times --adapter and --against only"
    if args.against_python and not args.against:
        return "--against-python needs --against"
    if args.against_python and not os.access(args.against_python, os.X_OK):
        return f"--against-python {args.against_python}: not an executable interpreter"
    if args.fail_above < 0:
        return f"--fail-above {args.fail_above}: must be >= 0"
    if args.processes < 1:
        return f"--processes {args.processes}: must be >= 1"
    if args.rounds is not None and args.rounds < 3 * args.processes:
        return (
            f"--rounds {args.rounds}: a ratio's interval needs at least 3 rounds per process "
            f"({3 * args.processes} with --processes {args.processes})"
        )
    if not args.timeout > 0:
        return f"--timeout {args.timeout}: must be > 0 seconds"
    if args.sizes and (args.quick or args.against):
        return "--sizes does not apply with --quick or --against, which time d=768 only: drop one of them"
    if args.compare:
        try:
            load_bench(args.compare)
        except MergeError as exc:
            return f"--compare {exc}"
    for name in (n for n in (args.adapter, args.against) if n):
        if ":" not in name and name not in registry.available():
            return f"{name!r}: unknown backend; available: {', '.join(registry.available())}, or package.module:factory"
    for name in (n for n in (args.adapter, args.against) if n and ":" in n):
        try:
            registry.resolve(name)
        except (ImportError, ValueError, TypeError) as exc:
            return str(exc)
    return None


def _memory(args, sides: int) -> str | None:
    """Sets args.processes where the command line did not (2 with --quick and the gate, else 1;
    1 where two would not fit in memory, said in a line); what is wrong where the asked number of
    workers would not fit (every implementation's workers are alive at once)."""
    available = machine.available_memory_bytes()

    def fits(p: int) -> bool:
        return available is None or sides * p * WORKER_BYTES <= available

    if args.processes is None:
        args.processes = 2 if (args.quick or args.against) and fits(2) else 1
        if (args.quick or args.against) and args.processes == 1:
            assert available is not None  # fits(2) failed, which it does only where the free memory is known
            print(
                f"bench: one process per implementation: {sides} implementations in two each would need about "
                f"{sides * 2 * WORKER_BYTES / 2**30:.0f} GB; this machine has {available / 2**30:.0f} GB free",
                flush=True,
            )
    if not fits(args.processes):
        assert available is not None  # fits() fails only where the free memory is known
        return (
            f"{sides} implementations in {args.processes} process(es) each need about "
            f"{sides * args.processes * WORKER_BYTES / 2**30:.0f} GB and this machine has "
            f"{available / 2**30:.0f} GB free: time fewer backends at once (--backend) or --processes 1"
        )
    return None


def sides_of(args, names: list[str]) -> list[session.Side]:
    """The gate's two sides, or every backend's and, on the CPU, the limit's (a numpy stream: no
    GPU's limit; the gate needs no roofline)."""
    if args.against:
        return [
            session.Side(f"new {args.adapter}", args.adapter, args.modes),
            session.Side(
                f"base {args.against}", args.against, args.modes, python=args.against_python or sys.executable
            ),
        ]
    limit = [session.Side(LIMIT, LIMIT, None)] if args.device == "cpu" else []
    return [session.Side(wire_route.label(n) or n, n, args.modes) for n in names] + limit


def plan_of(args) -> list[workloads.Workload]:
    if args.quick or args.against:
        return [workloads.standard(n) for n in (args.workloads or workloads.QUICK)]
    return [
        w
        for w in workloads.plan(sizes=args.sizes)
        if (not args.workloads or w.name in args.workloads) and (args.device == "cpu" or w.cache == "warm")
    ]  # a GPU's caches are not the host's to flush


def _default_mode(side: session.Side) -> None:
    """--quick and the gate time one mode per backend where --mode does not say: the
    implementation as its adapter runs it (a reference backend's suite mode; another's native
    hooks where it has them), else, for a workload that mode does not time, its suite mode."""
    if side.modes is None and side.backend != LIMIT and side.info.get("modes"):
        side.modes = list(dict.fromkeys([side.info["default_mode"], side.info["suite_mode"]]))
        side.one_mode = True


def run(args) -> int:
    start = time.perf_counter()
    try:
        names = [] if args.against else backend_names(args.backend) if args.backend or not args.exec_commands else []
        names += wire_route.bench_specs(args)  # --exec: each command's adapter spec (wire/route.py)
    except (LookupError, ValueError) as exc:
        return _usage(str(exc))
    problem = _memory(args, len(names) + 1 if not args.against else 2) or bad_args(args)
    if problem:
        return _usage(problem)
    plan = plan_of(args)
    rounds = args.rounds or ROUNDS["gate" if args.against else "quick" if args.quick else "full"]
    sides = sides_of(args, names)
    os.makedirs(args.out_dir, exist_ok=True)
    print(
        f"gpt2-conformance bench: {', '.join(s.label for s in sides)} on {args.device}; {len(plan)} workload(s), "
        f"{rounds} rounds; {machine.cores()} cores",
        flush=True,
    )
    tables = []
    load = timing.OtherLoad(lambda: session.own_cpu_seconds(sides))
    # fresh workers for each size: the allocator keeps what a process freed (session.MALLOC_ENV),
    # so one process's heap grows with every size's tables and outputs
    for d in dict.fromkeys(w.n_embd for w in plan):
        part = [w for w in plan if w.n_embd == d]
        try:
            session.start(sides, args.device, args.out_dir, args.timeout, args.processes)
            for side in sides:
                if args.quick or args.against:
                    _default_mode(side)
            for w in part:  # one workload's runners in memory at a time
                rows = session.prepare(sides, w)
                print(
                    f"  {w.group}: {sum(r.side.backend != LIMIT for r in rows)} implementation(s), {rounds} rounds",
                    flush=True,
                )
                with load.window():
                    session.alternate(rows, rounds, BLOCK_S, LEAD_IN_S)
                tables.append(summary.workload_table(w, rows, args.device, args.processes))
        finally:
            session.stop(sides)
    meta = {
        "device": args.device,
        "quick": bool(args.quick),
        "cores": machine.cores(),
        "rounds": rounds,
        "processes": args.processes,
        "block_s": BLOCK_S,
        "lead_in_s": LEAD_IN_S,
        "root": session.REPO_ROOT,
        "other_load_cores": load.cores(),
        "busy_cores": timing.OtherLoad.BUSY_CORES,
        "datetime": _dt.datetime.now(_dt.UTC).isoformat(),
        "wall_s": time.perf_counter() - start,
        "skipped": {s.label: s.info["skipped"] for s in sides if s.info.get("skipped")},
        "side_errors": {s.label: s.error for s in sides if s.error},
        "implementation": {s.label: s.info.get("implementation", "") for s in sides},
    }
    for label, error in meta["side_errors"].items():
        print(f"bench: {label}: {error}", flush=True)
    _write_outputs(tables, meta, args.out_dir)
    code = 1 if meta["side_errors"] or any(r.get("error") for t in tables for r in t["rows"]) else 0
    if not any(r.get("ratio") is not None for t in tables for r in t["rows"]):
        print("bench: nothing was timed (see above)", flush=True)
        code = max(code, EXIT_NOTHING_CHECKED) if not args.against else 1
    if args.against:
        verdict, text = gate.judge(tables, sides[0].label, sides[1].label, args.fail_above)
        print(text, flush=True)
        code = code or verdict
    if args.compare:
        print(compare.report(args.compare, os.path.join(args.out_dir, BenchmarkJSON.filename)))
    print(f"bench: {time.perf_counter() - start:.0f} s", flush=True)
    return code


def _write_outputs(tables: list[dict], meta: dict, out_dir: str) -> None:
    """The console table, then each file on its own (the plot first, so bench.md can link it):
    one that fails (a missing optional package, a full disk) costs that file and a line."""
    print("\n" + ConsoleTable().render(tables, meta) + "\n", flush=True)
    for writer in (RatioPlot(), BenchmarkJSON(), MarkdownReport()):
        try:
            path = writer.write(tables, meta, os.path.join(out_dir, writer.filename))
        except ImportError as exc:
            print(f"bench: no {writer.filename}: {exc} (pip install matplotlib for the plot)")
        except Exception as exc:  # noqa: BLE001 - one output's failure never costs the others
            print(f"bench: no {writer.filename}: {type(exc).__name__}: {exc}")
        else:
            if path is not None:
                meta.setdefault("outputs", []).append(writer.filename)
                print(f"wrote {path}")


def _usage(message: str) -> int:
    print(f"gpt2-conformance bench: error: {message}", file=sys.stderr)
    return 2
