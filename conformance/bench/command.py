"""`gpt2-conformance bench [--quick] [--device cpu|gpu] [--backend NAME ...] [--out-dir DIR]
[--malloc retain|system] [--compare BASELINE.json --fail-above PCT [--confirm N]]`.

Each backend runs in its own child process (conformance/bench/child.py: one framework per
process, as the runner does), measures the memory bandwidth there, and times its
backends/<fw>/bench.py hooks, warm and (at the bar shape) cold. The parent measures how busy
other processes kept the machine meanwhile, writes the console table, pytest-benchmark JSON,
Markdown and PNGs (each on its own: a missing optional package costs one output and a line),
then applies the regression gate: rows it calls REGRESSED are timed again in --confirm more
fresh processes and judged again on all their processes before the run fails.

Exit codes: 0 done (and no regression); 1 a regression above --fail-above, or a backend's
child failed; 2 bad command line.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import time

from gpt2_conformance.api import machine
from gpt2_conformance.bench import compare as compare_mod
from gpt2_conformance.bench import files, processes, timing, verdict, workloads
from gpt2_conformance.bench.table import ConsoleTable
from gpt2_conformance.results import EXIT_NOTHING_CHECKED
from gpt2_conformance.run import memory

# glibc serves large blocks with mmap and unmaps them on free; the size above which it does so
# moves with the process's history (it rises to the size of a freed mmapped block, up to 32 MiB,
# and the heap is trimmed above twice that). So a framework that returns a fresh [B, T, d]
# output may page-fault all of it in again on every call, or not, depending on which modes ran
# before it in the same process: the same JAX forward measured 2.1 ms after one mode and 8.1 ms
# (6145 faults per call, 24 MiB) after another. "retain" fixes both thresholds so that freed
# blocks stay in the heap and every mode is timed in the same allocator state; "system" leaves
# glibc alone, as an untuned process runs (d >= 1024 then faults on every call: 32 MiB outputs).
# "retain" also keeps every thread on the main arena: a thread other than the main one (XLA's
# and the frameworks' intra-op pools) allocates from a per-thread arena made of heaps of at most
# 64 MiB, which are unmapped as soon as they are empty whatever the trim threshold, and which
# cannot hold a larger block at all, so such a block is mmapped afresh on every call (glibc
# malloc/arena.c, HEAP_MAX_SIZE and heap_trim). Measured here (glibc 2.36, JAX 0.10 on 2 cores,
# B=8, T=1024, d=768): the jitted forward 10-12 ms with 6,145 faults per call (its 24 MiB
# output) and the backward 84-93 ms with 43,000 (its 154 MB dense gradient) with the
# thresholds alone; 1.3-1.7 ms and 37 ms with MALLOC_ARENA_MAX=1 too. The suite's children keep
# their arenas (memory.HEAP_ENV): a JAX verdict took the same 31-36 s either way.
# Other C libraries ignore these variables.
MALLOC_ENV = {"retain": {**memory.HEAP_ENV, "MALLOC_ARENA_MAX": "1"}, "system": {}}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="time the embedding forward/backward and the tied logits on every "
                                            "installed backend against the measured memory bandwidth")
    p.add_argument("--backend", action="append",
                   help="backend to time (repeatable): a registered name (`gpt2-conformance list`), a "
                        "package.module:factory spec, or `all` for every installed one (default: "
                        f"{', '.join(own_hooks())}, those installed). Backends without a backends/<fw>/bench.py "
                        "are timed through their native hooks (conformance/bench/native.py) and the Adapter API")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--quick", action="store_true", help="the bar shape and one of each other workload, few rounds, "
                                                        "no time-to-verdict (8-10 minutes on 2 cores with 3 processes "
                                                        "per backend)")
    p.add_argument("--mode", action="append", dest="modes", help="only this mode (repeatable; default: all)")
    p.add_argument("--sizes", type=_sizes, metavar="D[,D...]",
                   help="n_embd values for the prefill shapes, comma-separated (default: 768,1024,1280,1600; "
                        "not with --quick, whose shapes are d=768 only)")
    p.add_argument("--workload", action="append", dest="workloads",
                   choices=("forward_prefill", "forward_decode", "backward_prefill", "backward_decode",
                            "logits_prefill", "logits_decode", "step_decode"),
                   help="only this workload (repeatable; default: all)")
    p.add_argument("--verdict", action=argparse_bool(), default=None,
                   help="also time the conformance run per backend (default: on, off with --quick)")
    p.add_argument("--out-dir", default="bench-results",
                   help="where bench-results.json (raw), bench.json, bench.md, bench.png and bench-decode-step.png go")
    p.add_argument("--compare", metavar="BASELINE.json", help="pytest-benchmark JSON to compare medians with")
    p.add_argument("--across", nargs="+", metavar="RUN.json",
                   help="time nothing: print each row's median in each of these bench.json runs, its spread across "
                        "them and across processes, and how many rows agree within 10%% and 20%% (a Markdown table)")
    p.add_argument("--fail-above", type=float, default=10.0, metavar="PCT",
                   help="with --compare: exit 1 if a median regressed by more than PCT percent, beyond both runs' spread; rows whose own spread or page faults are too large to tell are listed as UNJUDGEABLE (default 10)")
    p.add_argument("--confirm", type=int, default=3, metavar="N",
                   help="with --compare: time the backends of the rows called REGRESSED again in N more fresh "
                        "processes (those rows' workloads and modes only) and judge those rows again on all their "
                        "processes, so a regression must hold in processes timed after it was seen (default 3; "
                        "0: judge once)")
    p.add_argument("--malloc", choices=tuple(MALLOC_ENV), default="retain",
                   help="retain (default): run each backend with glibc's MALLOC_MMAP_THRESHOLD_ and "
                        "MALLOC_TRIM_THRESHOLD_ fixed and MALLOC_ARENA_MAX=1 (every thread on the main heap), so a "
                        "freed output stays in the heap and every mode is timed in "
                        "the same allocator state; system: glibc's dynamic thresholds, as an untuned process runs "
                        "(fresh outputs may be faulted in anew on every call; see the faults/call column)")
    p.add_argument("--max-time", type=float, help="seconds of steady-state rounds per workload")
    p.add_argument("--processes", type=int, default=3, metavar="N",
                   help="time every backend in N fresh processes, the backends interleaved (default 3): a row's "
                        "median moves between processes by more than its samples spread inside one, so each row "
                        "keeps every process's median and the gate and the bar lines judge against that spread")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per backend process")


def _sizes(text: str) -> tuple[int, ...]:
    import argparse

    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: n_embd values are positive integers, comma-separated "
                                         "(e.g. 768,1024)")
    return tuple(dict.fromkeys(sizes))


def bad_args(args, names: list[str]) -> str | None:
    """What is wrong with these options for these backends (one line), or None, found before
    anything is timed (a full run is an hour). Each of these once started a run that timed
    nothing, or something other than what was asked, or failed only at its end."""
    if args.compare and not os.path.exists(args.compare):
        return f"no baseline {args.compare}"
    if args.compare:
        try:
            compare_mod.load(args.compare)
        except compare_mod.BenchFileError as exc:
            return f"--compare {exc}"
    if args.fail_above is not None and args.fail_above < 0:
        return f"--fail-above {args.fail_above}: must be >= 0"
    if args.processes < 1:
        return f"--processes {args.processes}: must be >= 1"
    if args.confirm < 0:
        return f"--confirm {args.confirm}: must be >= 0"
    if not args.timeout > 0:
        return f"--timeout {args.timeout}: must be > 0 seconds"
    if args.max_time is not None and not args.max_time > 0:
        return f"--max-time {args.max_time}: must be > 0 seconds"
    if args.quick and args.sizes:
        return "--sizes does not apply with --quick, whose shapes are d=768 only: drop one of them"
    if args.modes and not any(":" in n for n in names):  # a module:factory's modes are known only in its child
        known = {n: modes_named(n) for n in names}
        unknown = [m for m in args.modes if not any(m in modes for modes in known.values())]
        if unknown:
            return (f"--mode {unknown[0]}: no backend timed here has it; modes: "
                    + "; ".join(f"{n}: {', '.join(modes)}" for n, modes in known.items()))
    return _unusable_adapter(names)


def _unusable_adapter(names: list[str]) -> str | None:
    """A module:factory that cannot be imported or is not an adapter, said here in one line (its
    child would die with a traceback in the log and the run would go on, timing nothing)."""
    from gpt2_conformance import registry

    for name in (n for n in names if ":" in n):
        try:
            registry.resolve(name)
        except (ImportError, ValueError, TypeError) as exc:
            return str(exc)
    return None


def _child_pythonpath() -> str:
    """PYTHONPATH for a child that runs in REPO_ROOT: this one's entries made absolute, then this
    process's working directory (where a user's module:factory is found, as registry.load_object
    finds it here), so `PYTHONPATH=. gpt2-conformance bench --backend mymod:factory` works."""
    entries = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys([*entries, os.getcwd()]))


def modes_named(backend: str) -> list[str]:
    """The bench modes of a registered backend: its entry's own, else the native-hook and Adapter
    API modes (conformance/bench/adapter_hooks.py)."""
    try:
        return workloads.modes_of(backend)
    except LookupError:
        from gpt2_conformance.bench.adapter_hooks import MODE_NAMES

        return list(MODE_NAMES)


def argparse_bool():
    import argparse

    return argparse.BooleanOptionalAction


def own_hooks() -> list[str]:
    """The backends with bench modes of their own (a Runner in their bench.py): the default set."""
    from gpt2_conformance import registry

    return [n for n, e in registry.builtin().items() if e.bench_modes]


def installed(name: str) -> bool:
    """Whether the backend's frameworks are importable (their registry entry); a module:factory
    spec is taken as installed and fails in its child if it is not."""
    from gpt2_conformance import registry

    return ":" in name or registry.missing_framework(name) is None


def backend_names(requested: list[str] | None) -> list[str]:
    """--backend values, `all` expanded; a name that is neither registered nor a
    module:factory spec raises LookupError (exit 2 in run)."""
    from gpt2_conformance import registry

    if not requested:
        return [b for b in own_hooks() if installed(b)]
    names = []
    for name in requested:
        if name == "all":
            names += [b for b in registry.available() if installed(b)]
        elif ":" in name or name in registry.available():
            names.append(name)
        else:
            raise LookupError(f"--backend {name!r}: unknown backend; available: {', '.join(registry.available())}, "
                              "all, or package.module:factory")
    return list(dict.fromkeys(names))


def _request(args, backend: str, modes: list[str] | None = None, workload_names=None) -> dict:
    """The child's request: args' workloads and modes, or only `workload_names` and `modes`."""
    names = workload_names or args.workloads
    plan = [w for w in workloads.plan(args.quick, args.sizes) if not names or w.name in names]
    return {"backend": backend, "device": args.device, "quick": args.quick,
            "workloads": [w.as_dict() for w in plan], "modes": modes or args.modes,
            # one size for quick and full runs: on two cores here 256 MiB copied at 26 GB/s,
            # 512 MiB to 2 GiB at 47 GB/s (cause not found), so the limit depended on the mode
            "bandwidth_bytes": 512 << 20,
            "min_rounds": 3 if args.quick else 7, "max_rounds": 15 if args.quick else 60,
            "max_time": args.max_time if args.max_time is not None else (0.6 if args.quick else 1.0),
            "warmup": 1 if args.quick else 3, "malloc": args.malloc}


def run_child(request: dict, log_dir: str, timeout: float) -> dict:
    """The backend's child process; its result, or {"error": ...} if it died or hung."""
    backend = request["backend"]
    with tempfile.TemporaryDirectory(prefix="gpt2c-bench-") as tmp:
        req_path, res_path = os.path.join(tmp, "request.json"), os.path.join(tmp, "result.json")
        with open(req_path, "w") as f:
            json.dump(request, f)
        log_path = os.path.join(log_dir, "bench-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in backend)
                                + ".log")
        env = {k: v for k, v in os.environ.items() if k not in MALLOC_ENV["retain"]}  # "system": glibc's own
        env.update(PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=_child_pythonpath(),
                   **MALLOC_ENV[request.get("malloc", "retain")])
        with open(log_path, "w") as log:  # stderr (framework noise) to a file; progress lines to the console
            try:
                child = subprocess.run([sys.executable, "-m", "gpt2_conformance.bench.child", req_path, res_path],
                                       stderr=log, env=env, timeout=timeout, cwd=REPO_ROOT)
                code = child.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        if code == 0 and os.path.exists(res_path):
            with open(res_path) as f:
                return json.load(f)
    with open(log_path, errors="replace") as f:
        tail = f.read()[-1500:]
    return {"backend": backend, "device": request["device"], "records": [],
            "error": f"child exited with {code} (log {log_path}): {tail.strip()[-400:]}"}


def time_to_verdict(backend: str, device: str) -> dict:
    """The wall time of `gpt2-conformance run` on the backend, as a user types it (its own process,
    the suite split over the cores, the parity fingerprint, the scorecard), and its summary line."""
    target = ["--adapter", backend] if ":" in backend else ["--backend", backend]
    start = time.perf_counter()
    # its log folder (a user's run keeps one in the temp directory) goes when it has been timed
    with tempfile.TemporaryDirectory(prefix="gpt2c-verdict-", ignore_cleanup_errors=True) as tmp:
        try:
            out = subprocess.run([sys.executable, "-m", "gpt2_conformance.cli", "run", *target, "--device", device],
                                 capture_output=True, text=True, timeout=3600,
                                 env={**os.environ, **machine.child_temp_env(tmp)})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"backend": backend, "device": device, "seconds": time.perf_counter() - start, "error": repr(exc)}
        seconds = time.perf_counter() - start
    lines = [ln.strip() for ln in out.stdout.splitlines() if " passed, " in ln]
    summary = f"exit {out.returncode}: " + (lines[-1] if lines else (out.stderr.strip().splitlines() or ["?"])[-1][:120])
    return {"backend": backend, "device": device, "seconds": seconds, "summary": summary}


def run(args) -> int:
    if args.across:
        from gpt2_conformance.bench import across

        missing = [p for p in args.across if not os.path.exists(p)]
        if missing or len(args.across) < 2:
            print(f"gpt2-conformance bench: error: --across needs two or more bench.json files"
                  f"{'; not found: ' + ', '.join(missing) if missing else ''}", file=sys.stderr)
            return 2
        try:
            print(across.render(args.across))
        except compare_mod.BenchFileError as exc:
            print(f"gpt2-conformance bench: error: --across {exc}", file=sys.stderr)
            return 2
        return 0
    start = time.perf_counter()
    other_load = timing.OtherLoad()
    try:
        names = backend_names(args.backend)
    except LookupError as exc:
        print(f"gpt2-conformance bench: error: {exc}", file=sys.stderr)
        return 2
    problem = bad_args(args, names)
    if problem:
        print(f"gpt2-conformance bench: error: {problem}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    print(f"gpt2-conformance bench: {', '.join(names)} on {args.device}"
          f"{' (quick)' if args.quick else ''}; {machine.cores()} cores", flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(args.processes):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:  # each round starts one later
            if runs[name] and runs[name][-1].get("skipped"):
                continue  # skipped once, skipped in every process
            if not installed(name):
                runs[name] = [{"backend": name, "device": args.device, "records": [],
                               "skipped": f"{name} is not installed"}]
                continue
            if args.processes > 1:
                print(f"  {name:10s} process {round_ + 1} of {args.processes}", flush=True)
            runs[name].append(run_child(_request(args, name), args.out_dir, args.timeout))
            if runs[name][-1].get("skipped"):
                print(f"  {name:10s} skipped: {runs[name][-1]['skipped']}", flush=True)
    results = [processes.combine(runs[name]) for name in names]
    time_verdicts = args.verdict if args.verdict is not None else not args.quick
    verdicts = []
    if time_verdicts:
        for res in results:
            if res.get("skipped") or res.get("error"):
                continue
            print(f"  {res['backend']:10s} time to verdict (conformance run) ...", flush=True)
            verdicts.append(time_to_verdict(res["backend"], args.device))
    meta = {"device": args.device, "quick": args.quick, "cores": machine.cores(), "root": REPO_ROOT,
            "datetime": _dt.datetime.now(_dt.timezone.utc).isoformat(), "wall_s": time.perf_counter() - start,
            "other_load_cores": other_load.cores(), "malloc": args.malloc, "verdicts": verdicts,
            "processes": args.processes}
    paths = _write_outputs(results, verdicts, meta, args, start)
    code = 1 if any(r.get("error") for r in results) else 0
    if code == 0 and not any(r.get("records") for r in results):  # as `run`: a gate that checked nothing
        print("bench: nothing was timed: every backend was skipped (see above)", flush=True)
        code = EXIT_NOTHING_CHECKED
    if args.compare and "json" not in paths:
        print("bench: --compare needs bench.json, which was not written (see above)")
        code = 1
    elif args.compare:
        baseline = compare_mod.load(args.compare)
        current = _read_json(paths)
        regressions, changes, missing, new = compare_mod.compare(baseline, compare_mod.timed(current), args.fail_above)
        if regressions and args.confirm:
            retimed = _confirm(args, runs, regressions, current)
            if retimed:
                first = len(regressions)
                results = [processes.combine(runs[name]) for name in names]
                meta.update(other_load_cores=other_load.cores(), confirm_processes=args.confirm)
                paths = _write_outputs(results, verdicts, meta, args, start, table=False)
                if "json" in paths:
                    regressions, changes, missing, new = compare_mod.compare(
                        baseline, compare_mod.timed(_read_json(paths)), args.fail_above)
                print(f"confirm: judged again on all their processes, {len(regressions)} of the {first} row(s) "
                      "still REGRESSED", flush=True)
        print(compare_mod.report(regressions, changes, missing, new, args.fail_above))
        if regressions or not changes:  # a gate that matched no row judged nothing: it must not pass
            code = 1
    print(f"bench: {time.perf_counter() - start:.0f} s")
    return code


def _write_outputs(results: list[dict], verdicts: list[dict], meta: dict, args, start: float,
                   table: bool = True) -> dict:
    """The console table (unless `table` is False) and the files; {kind: path} of those written."""
    rows = []
    try:  # the figures are measured: from here on a failure costs one output, never the run's figures
        rows = verdict.workload_rows(results) + verdict.verdict_rows(verdicts)
        if table:
            print("\n" + ConsoleTable().render(results, rows, meta), flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"bench: the console table failed ({type(exc).__name__}: {exc}); the raw results are written below",
              flush=True)
    meta["wall_s"] = time.perf_counter() - start
    paths = files.write_all(results, rows, meta, args.out_dir)
    for kind, path in paths.items():
        print(f"wrote {path}")
    return paths


def _read_json(paths: dict) -> dict:
    """This run's bench.json, as written."""
    with open(paths["json"]) as f:
        return json.load(f)


def _confirm(args, runs: dict[str, list[dict]], regressions: list, current: dict) -> bool:
    """Time the backends of the rows called REGRESSED again, in args.confirm more fresh processes
    each (only those rows' workloads and modes), appending the results to `runs`; whether they
    all ran. Why: on these virtual machines a row can settle at one of two speeds per process (a
    NumPy decode at 9 or 17 us, a TensorFlow head at 5 or 7 ms, whole processes apart), so three
    processes that all landed slow are not yet a regression; a slowdown the code made holds in
    every process after it too. A process that fails leaves the first verdict standing."""
    info = {b["name"]: b.get("extra_info") or {} for b in current.get("benchmarks", [])}
    suspects: dict[str, tuple[set, set]] = {}
    for change in regressions:
        row = info.get(change.name) or {}
        if row.get("backend") in runs and row.get("mode") and row.get("workload"):
            modes, names = suspects.setdefault(row["backend"], (set(), set()))
            modes.add(row["mode"])
            names.add(row["workload"])
    if not suspects:
        return False
    print(f"confirm: {len(regressions)} row(s) REGRESSED; timing them again in {args.confirm} more fresh "
          f"process(es): " + "; ".join(f"{b} {', '.join(sorted(n))} ({', '.join(sorted(m))})"
                                       for b, (m, n) in suspects.items()), flush=True)
    for round_ in range(args.confirm):
        for backend, (modes, names) in suspects.items():
            print(f"  {backend:10s} confirm process {round_ + 1} of {args.confirm}", flush=True)
            result = run_child(_request(args, backend, sorted(modes), names), args.out_dir, args.timeout)
            if result.get("error") or result.get("skipped"):
                print(f"confirm: {backend}'s process failed, the first verdict stands: "
                      f"{result.get('error') or result.get('skipped')}", flush=True)
                return False
            runs[backend].append(result)
    return True


def main(argv: list[str] | None = None) -> int:
    """`python -m gpt2_conformance.bench.command [options]` (the same as the subcommand)."""
    import argparse

    parser = argparse.ArgumentParser(prog="gpt2-conformance")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
