"""gpt2-conformance: run the suite on a backend and print its scorecard.

    gpt2-conformance run --backend numpy [--device cpu] [--report-dir DIR]
    gpt2-conformance run --adapter mypkg.gpt2:make_adapter
    gpt2-conformance golden --checkpoint PATH [--backend NAME]   # is it the real GPT-2?
    gpt2-conformance bench [--quick] [--device gpu] [--compare BASE.json --fail-above PCT]
    gpt2-conformance thirdparty [NAME ...] [--out reports]     # one report per judged implementation
    gpt2-conformance merge FILE.json... [--out-dir DIR]   # one matrix, parity, bench table, scoreboard.html
    gpt2-conformance spec            # SPEC.md, generated from the clause registry
    gpt2-conformance list            # backend names

Exit codes: 0 every claimed clause passed (or failed with a waiver); 1 a clause failed or the
backend could not run; 2 bad command line; 3 nothing was checked (every clause not claimed or
skipped); 4 no clause failed, but the suite could not judge some (ERROR: the suite's own data or
code failed, never the implementation's).
"""

from __future__ import annotations

import argparse
import sys
import time

from conformance import console, merge, registry, report, runner, spec, thirdparty, waivers
from conformance.golden import command as golden_command
from conformance.bench import command as bench_command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpt2-conformance", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the suite on one backend")
    target = run.add_mutually_exclusive_group(required=True)
    target.add_argument("--backend", help="backend name (see `gpt2-conformance list`), or `all`")
    target.add_argument("--adapter", help="adapter factory as package.module:factory")
    run.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    run.add_argument("--report-dir", help="write JSON, JUnit XML and Markdown reports here")
    run.add_argument("--waivers", help="TOML file of expected deviations (default: the adapter's WAIVERS file, if any)")
    run.add_argument("--timeout", type=float, default=runner.DEFAULT_TEST_TIMEOUT,
                     help="seconds per test before it is failed as hung (default %(default)s)")
    run.add_argument("--checkpoint", help="GOLDEN clauses: use this GPT-2 checkpoint's tables "
                     "(default: the shipped real wpe and known wte values)")
    run.add_argument("--verbose", action="store_true", help="show the frameworks' own output (TensorFlow's "
                     "absl/oneDNN lines, ...) on the console; by default it goes to the backend's log file")
    golden_command.add_parser(sub)
    bench_command.add_parser(sub)
    thirdparty.add_parser(sub)
    merge.add_parser(sub)
    sub.add_parser("spec", help="print the spec (SPEC.md) generated from the clause registry")
    sub.add_parser("list", help="list backend names")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "spec":
        print(spec.markdown())
        return 0
    if args.command == "list":
        print("\n".join(registry.available()))
        return 0
    if args.command == "golden":
        return golden_command.run(args)
    if args.command == "bench":
        return bench_command.run(args)
    if args.command == "thirdparty":
        return thirdparty.run_command(args)
    if args.command == "merge":
        return merge.run(args)
    if not args.timeout > 0:
        print(f"gpt2-conformance: error: --timeout must be > 0, got {args.timeout}", file=sys.stderr)
        return 2
    if args.backend == "all":
        return _run_all(args)
    name = args.backend or args.adapter
    try:  # fail fast, in this process, on a name that cannot be resolved
        path = _waiver_file(name, args)
        if path:
            waivers.load(path)
    except (ImportError, LookupError, ValueError) as exc:  # WaiverFileError is a ValueError
        print(f"gpt2-conformance: error: {exc}", file=sys.stderr)
        return 2
    return _run_one(name, args).exit_code


def _factory(args, name: str | None = None):
    """--adapter is always module:factory; --backend a name (or, for convenience, a spec)."""
    return registry.load_object(args.adapter) if args.adapter else registry.resolve(name or args.backend)


def _waiver_file(name: str, args) -> str | None:
    """--waivers, else the file the adapter names in its WAIVERS attribute. Resolving imports
    the adapter's framework here: its native output goes to the log unless --verbose."""
    with console.native_output_to(None if args.verbose else console.log_path(args.report_dir, name, args.device)):
        factory = _factory(args, name)  # resolved even with --waivers: an unknown name is a usage error
    return args.waivers or getattr(factory, "WAIVERS", None)


def _implementation(name: str, args, log: str) -> str:
    """The adapter's own description (implementation() where it has one, e.g. "transformers 5.24.0
    GPT2LMHeadModel (torch 2.13.0)"), else its class."""
    with console.native_output_to(None if args.verbose else log):
        factory = _factory(args, name)
        describe = getattr(factory, "implementation", None)
        try:
            return describe() if callable(describe) else f"{factory.__module__}:{factory.__qualname__}"
        except Exception as exc:  # noqa: BLE001 - a description must never cost the run
            return f"{getattr(factory, '__qualname__', name)} (implementation() raised {type(exc).__name__})"


def _run_one(name: str, args) -> "runner.res.SuiteResult":
    path = _waiver_file(name, args)
    waiver_list = waivers.load(path) if path else []
    log = console.log_path(args.report_dir, name, args.device)
    result = runner.run_backend(name, args.device, args.timeout, adapter_spec=args.adapter, checkpoint=args.checkpoint,
                                log_path=log, echo=args.verbose)
    result.environment["implementation"] = _implementation(name, args, log)
    waivers.apply(result, waiver_list)
    result.parity = _fingerprint(name, result)
    print(report.scorecard(result), flush=True)
    if args.report_dir:
        for path in report.write_all(result, args.report_dir):
            print(f"wrote {path}")
    return result


def _fingerprint(name: str, result) -> dict:
    """The run's parity fingerprint (conformance.parity) for `merge`: one extra child process."""
    from conformance import parity

    if result.error or result.exit_code == 3:
        return {"error": "not computed: the backend did not run" if result.error else
                "not computed: nothing was checked in this run"}
    return parity.fingerprint_child(name, result.device)


def _run_all(args) -> int:
    """Every backend, each in its own child processes: one framework's crash, hang or import
    error cannot take the others down."""
    results, missing = [], {}
    start = time.perf_counter()
    for name in registry.available():
        lacking = registry.missing_framework(name)
        if lacking:
            missing[name] = lacking
            print(f"gpt2-conformance: backend {name}: not installed ({lacking} is not importable)")
            continue
        results.append(_run_one(name, args))
    print("\n" + report.matrix(results, missing))
    from conformance import parity

    print("\n" + parity.table_from_fingerprints({r.backend: r.parity for r in results}))
    print(f"\nall backends: {time.perf_counter() - start:.0f} s")
    codes = [r.exit_code for r in results]
    if 1 in codes or not codes:
        return 1
    return 4 if 4 in codes else (3 if all(c == 3 for c in codes) else 0)


if __name__ == "__main__":
    sys.exit(main())
