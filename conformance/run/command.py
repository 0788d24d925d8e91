"""`gpt2-conformance run`: the suite on one backend (or all of them) and its scorecard.

A built-in backend is run from its registry entry alone: this process imports no framework,
the suite's child process imports it once and also reports the adapter's description and the
run's parity fingerprint (conformance/run/events.py). `--backend all` runs the backends in
parallel processes (`--jobs`, default: this machine's cores), longest first (run/schedule.py), and
prints their scorecards in the registry's order, whatever order they start or finish in."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import random
import shlex
import signal
import sys
import tempfile
import threading
import time

from gpt2_conformance import registry, spec, waivers
from gpt2_conformance import results as res
from gpt2_conformance.api.machine import cores
from gpt2_conformance.run import console, envs, files, parity, progress, report, runner, schedule
from gpt2_conformance.runtime import inputs
from gpt2_conformance.wire import route as wire_route


def add_parser(sub) -> None:
    run = sub.add_parser("run", help="run the suite on one backend, or all")
    target = run.add_mutually_exclusive_group(required=True)
    target.add_argument("--backend", help="backend name (see `gpt2-conformance list`), or `all`")
    target.add_argument("--adapter", help="adapter factory as package.module:factory")
    files.add_arguments(target, run)  # --onnx FILE, --gguf FILE, --engine: the file route (run/files.py)
    wire_route.add_arguments(target)  # --exec CMD: a program speaking the wire protocol (wire/route.py)
    run.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    run.add_argument("--report-dir", help="write JSON, JUnit XML and Markdown reports (and the logs) here")
    run.add_argument(
        "--waivers",
        help="TOML file of expected deviations (default: the backend's own waiver file, "
        "or the adapter's WAIVERS attribute)",
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=runner.DEFAULT_TEST_TIMEOUT,
        help="seconds per test before it is failed as hung (default %(default)s); a test stuck in native code, "
        "which the limit's signal cannot stop, is killed after a grace of as many seconds again (at most "
        f"{runner.HANG_GRACE:g})",
    )
    run.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="child processes at once (default: this machine's "
        "cores): with --backend all, backends side by side; with one backend, its suite split over them",
    )
    run.add_argument(
        "--checkpoint",
        help="GOLDEN clauses: use this GPT-2 checkpoint's tables (default: the shipped real wpe and known wte values)",
    )
    run.add_argument(
        "--thorough",
        action="store_true",
        help="10x the examples, drawn from a random seed that "
        "is printed and stored in the report (the default draws are derandomized: a repeatable gate)",
    )
    run.add_argument("--seed", type=int, help="with --thorough: replay the draws of the run that printed this seed")
    run.add_argument(
        "--no-shrink",
        action="store_true",
        help="report each failing example as first drawn, not minimised: the same verdicts, sooner where clauses fail",
    )
    run.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="NODEID",
        help="run only this test (repeatable): the nodeid a report's repro line names",
    )
    run.add_argument(
        "--durations",
        type=int,
        default=0,
        metavar="N",
        help="after each scorecard, its N slowest tests with their clause (where the verdict's time goes)",
    )
    run.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines while it works (on a terminal a live line per running backend, elsewhere "
        "plain lines on stderr): only the scorecards and the summary",
    )
    run.add_argument(
        "--no-build-envs",
        action="store_true",
        help="do not build the environment of a backend that runs in one of its own when it is missing "
        "(`gpt2-conformance env NAME` builds it): that backend is not judged, and the summary says so",
    )
    run.add_argument(
        "--verbose",
        action="store_true",
        help="show the frameworks' own output (TensorFlow's "
        "absl/oneDNN lines, ...) on the console; by default it goes to the run's log file",
    )


def run(args) -> int:
    runner.STOPPING.clear()  # a run interrupted earlier in this process is over
    problem = _bad_args(args)
    if problem:
        return _usage(problem)
    if args.thorough and args.seed is None:
        args.seed = random.randrange(2**32)  # one seed for every child of the run (shards, restarts, backends)
    if args.backend == "all":
        return _run_all(args)
    if args.backend and not args.no_build_envs and registry.unbuilt_environment(args.backend):
        with progress.display(args.quiet) as shown:
            built = _build_environment(args.backend, args, shown)
        if built is None:
            return res.EXIT_FAIL
    name = files.prepare(args) or wire_route.prepare(args) or args.backend or args.adapter
    try:  # fail fast, in this process, on a name that cannot be resolved or a waiver file that cannot be read
        waiver_list = _waivers(name, args, _log_dir(args))
    except inputs.InputError as exc:
        return _usage(str(exc), args)
    except TimeoutError as exc:  # the adapter's module hung at import: it could not run
        print(f"gpt2-conformance: error: {exc}", file=sys.stderr)
        _drop_empty_log_dir(args)
        return res.EXIT_FAIL
    return _run_one(name, args, waiver_list, _log_dir(args))


def _bad_args(args) -> str | None:
    """What is wrong with the command line (one line), found before any child starts; the
    backend's own name, waivers and adapter are checked next, by _waivers."""
    if not 0 < args.timeout < float("inf"):  # nan and inf too: the watchdog needs a number
        return f"--timeout must be > 0 and finite, got {args.timeout}"
    if args.jobs is not None and args.jobs < 1:
        return f"--jobs must be >= 1, got {args.jobs}"
    if args.durations < 0:
        return f"--durations must be >= 0, got {args.durations}"
    if files.problem(args):
        return files.problem(args)
    lacking = runner.missing_child_plugins()
    if lacking:
        return lacking
    try:
        inputs.seed(args.seed, args.thorough, inputs.CLI)
        for case in args.case:
            inputs.case(case, inputs.CLI)
        if args.checkpoint:
            inputs.checkpoint(args.checkpoint, inputs.CLI)
    except inputs.InputError as exc:
        return str(exc)
    return wire_route.problem(args)  # last: it starts the --exec command once, to read its hello


def _usage(message: str, args=None) -> int:
    print(f"gpt2-conformance: error: {message}", file=sys.stderr)
    _drop_empty_log_dir(args)
    return res.EXIT_USAGE


def _drop_empty_log_dir(args) -> None:
    """A command that ran nothing leaves no empty log folder behind."""
    folder = _LOG_DIRS.pop(id(args), None) if args is not None else None
    if folder and not os.listdir(folder):
        os.rmdir(folder)


_LOG_DIRS: dict[int, str] = {}  # id(args) -> this run's log folder


def _log_dir(args) -> str:
    """--report-dir, else one new temporary folder for this run (concurrent runs never share one)."""
    if args.report_dir:
        os.makedirs(args.report_dir, exist_ok=True)
        return args.report_dir
    if id(args) not in _LOG_DIRS:  # made once: the command asks for its folder more than once
        _LOG_DIRS[id(args)] = tempfile.mkdtemp(prefix="gpt2-conformance-")
    return _LOG_DIRS[id(args)]


def _spec_of(name: str, args) -> str | None:
    """The adapter spec to import for `name`: --adapter's, or a module:factory given to --backend."""
    if args.adapter:
        return args.adapter
    return name if ":" in name else None


def _waivers(name: str, args, log_dir: str) -> list:
    """The waivers that apply: --waivers, else the built-in's own file (its registry entry), else
    the WAIVERS attribute of an --adapter (imported here, its native output to the log). A
    built-in is not imported here (its framework is the children's): its name is checked, and a
    missing framework is a usage error with the install hint."""
    spec = _spec_of(name, args)
    if spec is None:
        inputs.backend(name, inputs.CLI)
        if registry.entry(name) is None:  # an adapter plug-in: imported to read its claims and WAIVERS
            with _bounded(args.timeout, f"importing the plug-in {name}"):
                return inputs.waiver_list(name, args.waivers, inputs.adapter(name))
        return inputs.waiver_list(name, args.waivers)
    with (
        console.native_output_to(None if args.verbose else console.log_path(log_dir, name, args.device)),
        _bounded(args.timeout, f"importing the adapter {spec}"),
    ):
        # checked here: in the child, an adapter without claims cost every clause
        factory = inputs.adapter(spec, spec_only=bool(args.adapter))
    return inputs.waiver_list(spec, args.waivers, factory)


@contextlib.contextmanager
def _bounded(seconds: float, what: str):
    """A hang in Python code inside the block ends after `seconds` with TimeoutError (SIGALRM, as
    pytest-timeout's own method; only the main thread can take it, so elsewhere it is unbounded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"{what} took longer than --timeout {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_one(name: str, args, waiver_list: list, log_dir: str) -> int:
    """One backend: its suite split over --jobs child processes (default: the cores)."""
    # --case: one child. A test lands in one shard only, and a shard left with no --case test
    # errored ("names no test of the suite"), failing the replay of a test that passed
    with progress.display(args.quiet) as shown:
        shards = 1 if args.case else (args.jobs or cores())
        result = _judge(name, args, waiver_list, log_dir, shards=shards, shown=shown)
    refused = _refusal(result)
    if refused:  # nothing ran: no reports
        return _usage(refused, args)
    _print_scorecard(result, args)
    _write_reports(result, args)
    return result.exit_code


def _refusal(result: res.SuiteResult) -> str | None:
    """The child's refusal of a --case whose brackets name no collected test (the command line
    checked the file and the function; the parameters exist only once the suite is collected),
    or None where it ran. A refused run's log holds only the refusal: it is removed."""
    line = next((line for line in (result.error or "").splitlines() if res.UNKNOWN_CASE_PREFIX in line), None)
    if line is None:
        return None
    if os.path.exists(result.log_path):
        os.remove(result.log_path)
    return "--case " + line.split(res.UNKNOWN_CASE_PREFIX, 1)[1]


def _judge(
    name: str,
    args,
    waiver_list: list,
    log_dir: str,
    shards: int = 1,
    side_by_side: int = 1,
    shown: progress.Display | None = None,
) -> res.SuiteResult:
    shown = shown or progress.Display()
    shown.begin(name)
    log = console.log_path(log_dir, name, args.device)
    draws = (["--gpt2c-thorough", "--gpt2c-seed", str(args.seed)] if args.thorough else []) + (
        ["--gpt2c-no-shrink"] if args.no_shrink else []
    )
    cases = [arg for case in args.case for arg in ("--gpt2c-case", case)]
    draws += waivers.first_drawn_args(waiver_list)
    result = runner.run_backend(
        name,
        args.device,
        args.timeout,
        adapter_spec=_spec_of(name, args),
        checkpoint=args.checkpoint,
        log_path=log,
        echo=args.verbose,
        parity=not args.case,
        shards=shards,
        side_by_side=side_by_side,
        extra_args=draws + cases,
        progress=lambda done, total, doing: shown.tests(name, done, total, doing),
    )
    result.environment["draws"] = (
        {
            "mode": "thorough",
            "examples_factor": spec.THOROUGH_FACTOR,
            "seed": args.seed,
            "replay": f"--thorough --seed {args.seed}",
        }
        if args.thorough
        else {"mode": "default", "derandomized": True}
    )
    result.environment["draws"]["shrink"] = not args.no_shrink
    if waiver_list and not args.no_shrink:
        result.environment["draws"]["first_drawn"] = waivers.clauses(waiver_list)
    result.environment.setdefault("implementation", name)
    result.environment["log"] = os.path.basename(log)  # beside the reports; the report names no folder
    result.log_path = log
    for clause in result.clauses if args.case else ():
        if not clause.tests:  # not a suite error: the run was narrowed to other tests on purpose
            clause.status, clause.message = res.SKIPPED, "not selected (--case)"
    waivers.apply(result, waiver_list)
    if files.kind(args):  # why each claim the file cannot make is not made, and what was found
        files.explain_not_claimed(result, inputs.adapter(args.adapter, spec_only=True))
    _add_repro_lines(result, name, args)
    if result.error or result.exit_code == res.EXIT_NOTHING_CHECKED:
        result.parity = parity.not_computed(
            "the backend did not run" if result.error else "nothing was checked in this run"
        )
    elif args.case:
        result.parity = parity.not_computed("--case runs part of the suite")
    shown.end(name, report.counts_line(result) if not result.error else f"could not run: {result.error}")
    return result


def _add_repro_lines(result: res.SuiteResult, name: str, args) -> None:
    """Each failed test's one-line replay: this command, narrowed to that test (same draws)."""
    spec = _spec_of(name, args)
    target = f"--adapter {shlex.quote(spec)}" if spec else f"--backend {shlex.quote(name)}"
    target = files.target(args) or wire_route.target(args) or target  # a file run replays with --onnx/--gguf FILE
    options = "".join(
        [
            f" --device {args.device}" if args.device != "cpu" else "",
            f" --checkpoint {shlex.quote(args.checkpoint)}" if args.checkpoint else "",
            f" --thorough --seed {args.seed}" if args.thorough else "",
            " --no-shrink" if args.no_shrink else "",
        ]
    )
    for clause in result.clauses:
        for test in clause.tests:
            if test.outcome == "failed":  # the node id from the suite's own folder: it replays from any directory
                path, _, name = test.nodeid.partition("::")
                case = f"{os.path.basename(path)}::{name}"
                test.repro = f"gpt2-conformance run {target}{options} --case {shlex.quote(case)}"


def _print_scorecard(result: res.SuiteResult, args) -> None:
    if result.environment.get("found"):  # the file route: what the suite found in the file
        print(f"found in the file: {result.environment['found']}", flush=True)
    print(report.scorecard(result), flush=True)
    slowest = report.slowest(result, args.durations) if args.durations else ""
    if slowest:
        print(slowest, flush=True)


def _write_reports(result: res.SuiteResult, args) -> None:
    if args.report_dir:
        for path in report.write_all(result, args.report_dir):
            print(f"wrote {path}")
    print(f"log: {result.log_path}")


def _run_all(args) -> int:
    """Every backend, each in its own child processes (one framework's crash, hang or import
    error cannot take the others down), `--jobs` at a time; scorecards in the registry's order.
    A backend with an environment of its own is built first where it is missing (unless
    --no-build-envs); one that cannot run here is not judged, and the summary says why."""
    start = time.perf_counter()
    log_dir = _log_dir(args)
    with progress.display(args.quiet) as shown:
        building = time.perf_counter()
        built = [
            name
            for name in registry.available()
            if not args.no_build_envs
            and registry.unbuilt_environment(name)
            and _build_environment(name, args, shown) is not None
        ]
        building = time.perf_counter() - building if built else 0.0
        todo, missing = [], {}
        for name in registry.available():
            lacking, unbuilt = registry.missing_framework(name), registry.unbuilt_environment(name)
            if unbuilt:
                missing[name] = unbuilt + (" (--no-build-envs)" if args.no_build_envs else "")
                print(f"gpt2-conformance: {missing[name]}")
            elif lacking:
                missing[name] = f"not installed ({lacking} is not importable)"
                print(f"gpt2-conformance: backend {name}: {missing[name]}")
            else:
                todo.append(name)
        jobs = args.jobs or cores()
        at_once = max(1, min(jobs, len(todo) or 1))
        results = []
        # brackets only a collected suite can check: one backend first, alone, so that a refusal is one
        # usage error rather than every backend's scorecard of it; its run is kept
        first = _judge_named(todo[0], args, log_dir, shown=shown) if todo and any("[" in c for c in args.case) else None
        refused = _refusal(first) if first is not None else None
        if refused:
            return _usage(refused, args)
        with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
            judged = {first.backend: first} if first is not None else {}
            futures = {
                name: pool.submit(_judge_named, name, args, log_dir, at_once, shown)
                for name in schedule.order(todo, args.device)
                if name not in judged
            }
            try:
                for name in todo:  # the registry's order: the output does not depend on which finishes first
                    result = judged[name] if name in judged else futures[name].result()
                    _print_scorecard(result, args)
                    _write_reports(result, args)
                    results.append(result)
            except KeyboardInterrupt:  # no backend starts after it, the running ones end (runner.STOPPING)
                runner.STOPPING.set()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    schedule.record({r.backend: r.duration for r in results if not r.error}, args.device)
    nothing = {r.backend: _nothing_checked(r) for r in results if r.exit_code == res.EXIT_NOTHING_CHECKED}
    print("\n" + report.matrix(results, missing))
    print("\n" + _parity_section(args, results))
    print("\n" + _summary(results, {**missing, **nothing}, time.perf_counter() - start, jobs, built, building))
    code = res.combined_exit_code([r.exit_code for r in results])
    return res.EXIT_NOTHING_CHECKED if code == res.EXIT_PASS and (missing or nothing) else code


def _summary(results, not_judged: dict[str, str], seconds: float, jobs: int, built: list[str], building: float) -> str:
    """The run's last line: how many backends were judged, which were not and why, and the time
    (an environment built on the way, apart)."""
    judged = len(results) - sum(name in not_judged for name in (r.backend for r in results))
    line = f"all backends: {judged} judged, {len(not_judged)} not judged, in {seconds:.0f} s with --jobs {jobs}"
    if built:
        line += f" (of which {building:.0f} s building the environment of {', '.join(built)})"
    return line + "".join(f"\n  not judged: {name}: {why}" for name, why in not_judged.items())


def _nothing_checked(result: res.SuiteResult) -> str:
    """Why a backend's run checked nothing: its skips' reason (a device or compiler it lacks)."""
    reasons = [c.message for c in result.clauses if c.status in (res.SKIPPED, res.NOT_CLAIMED) and c.message]
    return reasons[0] if reasons else "nothing was checked"


def _build_environment(name: str, args, shown: progress.Display) -> float | None:
    """Build `name`'s own environment before judging it, as `gpt2-conformance env NAME` would:
    announced, its pip lines as progress and in the log, then its time and size. The seconds it
    took, or None where the build failed (said in one line)."""
    entry = registry.entry(name)
    assert entry is not None and entry.environment is not None
    path = envs.folder(name)
    state = "out of date" if os.path.exists(envs.python_of(path)) else "not built yet"
    print(
        f"gpt2-conformance: {name} runs in an environment of its own, {state}: building it in {path} "
        f"({', '.join(entry.environment.requirements)} and this suite; --no-build-envs skips it)",
        flush=True,
    )
    log = console.log_path(_log_dir(args), f"{name}-environment", args.device)
    start = time.perf_counter()
    with open(log, "a", encoding="utf-8") as f:

        def line(text: str) -> None:
            f.write(text + "\n")
            if text.strip():
                shown.step(name, f"building its environment: {text.strip()[:100]}")

        code = envs.build(name, out=line, lines=line)
    took = time.perf_counter() - start
    shown.end(name, f"environment {'built' if code == 0 else 'not built'} in {took:.0f} s")
    if code != 0:
        print(f"gpt2-conformance: {name}: its environment could not be built (the pip output: {log})", flush=True)
        return None
    size = envs.size_of(path) / 1e9
    print(f"gpt2-conformance: {name}: environment built in {took:.0f} s ({size:.1f} GB in {path})", flush=True)
    return took


def _parity_section(args, results: list[res.SuiteResult]) -> str:
    """The parity table of `run --backend all`, or one line where no backend has a fingerprint."""
    if args.case:
        return "parity: not computed, --case runs part of the suite"
    fingerprints = {r.backend: r.parity for r in results}
    if fingerprints and all("error" in fp for fp in fingerprints.values()):  # e.g. --device gpu, no GPU here
        reasons = sorted({fp["error"].removeprefix(parity.NOT_COMPUTED) for fp in fingerprints.values()})
        return f"parity: not computed for any backend ({'; '.join(reasons)})"
    return parity.table_from_fingerprints(fingerprints)


def _judge_named(
    name: str, args, log_dir: str, side_by_side: int = 1, shown: progress.Display | None = None
) -> res.SuiteResult:
    try:
        waiver_list = _waivers(name, args, log_dir)
    except inputs.InputError as exc:
        result = res.SuiteResult(name, args.device, spec.SPEC_VERSION, res.aggregate([]), 0.0, error=str(exc))
        result.log_path = console.log_path(log_dir, name, args.device)
        result.environment["log"] = os.path.basename(result.log_path)
        return result
    return _judge(name, args, waiver_list, log_dir, side_by_side=side_by_side, shown=shown)
