"""gpt2-conformance: run the suite on a backend and print its scorecard.

    gpt2-conformance run --backend numpy [--device cpu] [--report-dir DIR]
    gpt2-conformance run --adapter mypkg.gpt2:make_adapter
    gpt2-conformance run --exec "./gpt2_wire"              # a program in any language, over the wire protocol
    gpt2-conformance run --backend all [--jobs N]          # every backend, N at a time
    gpt2-conformance golden --checkpoint PATH [--backend NAME]   # is it the real GPT-2?
    gpt2-conformance bench [--quick] [--device gpu] [--compare BASE.json --fail-above PCT]
    gpt2-conformance thirdparty [NAME ...] [--out reports]     # one report per judged implementation
    gpt2-conformance upstream [NAME ...] [--out-dir DIR]  # a reproduction + issue draft per waived cause
    gpt2-conformance merge FILE.json... [--out-dir DIR]   # one matrix, parity, bench table, scoreboard.html
    gpt2-conformance out-of-range --reports DIR [--out FILE]  # what every backend did with each bad index
    gpt2-conformance spec            # SPEC.md, generated from the clause registry
    gpt2-conformance env NAME [--dry-run]  # build the environment of a backend that runs in its own
    gpt2-conformance wire build c|rust|js  # a reference client of the wire protocol (also: wire schema, wire serve)
    gpt2-conformance list [--long]   # backend names (--long: what they are, whether installed)
    gpt2-conformance --version       # the package and the spec version its verdicts are against

Exit codes (gpt2_conformance.results): 0 every claimed clause passed (or failed with a waiver);
1 a clause failed, a waiver is stale (its clause passed), or the backend could not run; 2 bad
command line; 3 nothing was checked (every clause not claimed or skipped); 4 no clause failed,
but the suite could not judge some (ERROR: the suite's own data or code failed, never the
implementation's).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import tempfile

# command -> the module that has its add_parser(subparsers) and run(args) -> exit code
COMMANDS = {
    "run": "gpt2_conformance.run.command",
    "golden": "gpt2_conformance.golden.command",
    "bench": "gpt2_conformance.bench.command",
    "thirdparty": "gpt2_conformance.run.thirdparty",
    "upstream": "gpt2_conformance.upstream.command",
    "merge": "gpt2_conformance.merge.command",
    "out-of-range": "gpt2_conformance.merge.out_of_range",
    "constraints": "gpt2_conformance.run.constraints_command",
    "env": "gpt2_conformance.run.envs",
    "wire": "gpt2_conformance.wire.command",
    "spec": "gpt2_conformance.cli",
    "list": "gpt2_conformance.cli",
}


def _parser(modules: dict) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpt2-conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in modules.items():
        if module is sys.modules[__name__]:  # this module (also when run as __main__)
            own = sub.add_parser(name, help=_OWN_HELP[name])
            if name == "list":
                own.add_argument(
                    "--long",
                    action="store_true",
                    help="with each name: its kind, and whether "
                    "it is installed (and if not, the pip command that installs it)",
                )
        elif name not in {p for p in sub.choices}:
            module.add_parser(sub)
    return parser


def _version() -> str:
    """`gpt2-conformance 0.1.0 (spec 1.3)`: the package and the spec its verdicts are against."""
    from importlib import metadata

    from gpt2_conformance.spec import SPEC_VERSION

    try:
        package = metadata.version("gpt2-conformance")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        package = "(not installed)"
    return f"gpt2-conformance {package} (spec {SPEC_VERSION})"


_OWN_HELP = {"spec": "print the spec (SPEC.md) generated from the clause registry", "list": "list the backend names"}


def run(args) -> int:
    """The two commands this module answers itself."""
    if args.command == "spec":
        from gpt2_conformance import spec

        print(spec.markdown())
        return 0
    from gpt2_conformance import registry

    broken = registry.broken() if args.long else {}
    for name in registry.available():
        if not args.long:
            print(name)
            continue
        found = registry.entry(name)
        # a plug-in whose adapter module is not there: the same check for both kinds of plug-in
        missing = broken.get(name) or registry.adapter_missing(name)
        if found is None:  # an adapter plug-in (a factory, no entry), or one that cannot be used
            state = f"broken: {missing}" if missing else f"adapter {registry.plugin_value(name)}"
            print(f"{name:<22} {'plug-in':<10} {state}")
            continue
        lacking = registry.missing_framework(name)
        install = registry.install_command(found)
        unbuilt = registry.unbuilt_environment(name)
        state = (
            f"not installed: {unbuilt}"
            if unbuilt
            else f"not installed: {lacking} missing ({install})"
            if lacking
            else f"broken: {missing}"
            if missing
            else "installed"
        )
        print(f"{name:<22} {found.kind:<10} {state}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # only the named command's module is imported (a `--no-deps` install can still print its
    # constraints; `list` imports no framework); every command's, for the top-level help
    named = next((a for a in argv if not a.startswith("-")), None)
    chosen = {named: COMMANDS[named]} if named in COMMANDS else COMMANDS
    modules = {
        name: sys.modules[__name__] if path == COMMANDS["list"] else importlib.import_module(path)
        for name, path in chosen.items()
    }
    args = _parser(modules).parse_args(argv)
    problem = _unwritable_output(args)
    if problem:
        print(f"gpt2-conformance {args.command}: error: {problem}", file=sys.stderr)
        return 2
    try:
        return modules[args.command].run(args)
    except BrokenPipeError:  # `gpt2-conformance list --long | head`: the reader left, which is no error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes stdout at exit
        return 1
    except KeyboardInterrupt:  # Ctrl-C: the terminal's SIGINT reached the children too (one process group)
        print(f"\ngpt2-conformance {args.command}: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports it


# each command's output option, by its dest: (the option, whether it names a file or a folder)
FILE, FOLDER = "file", "folder"
OUTPUTS = {
    "report_dir": ("--report-dir", FOLDER),
    "out_dir": ("--out-dir", FOLDER),
    "out": ("--out", FOLDER),  # thirdparty's folder of reports
    "out_file": ("--out", FILE),  # out-of-range's one Markdown file
}


def _unwritable_output(args) -> str | None:
    """An output that cannot be written, said before anything runs (the commands found out at the
    end, after their run, with a traceback). Nothing is made here: a file is created and removed in
    the folder or its nearest existing parent, as permission bits do not tell (root may write
    anywhere but /proc, a read-only mount, ...)."""
    for attr, (option, kind) in OUTPUTS.items():
        path = getattr(args, attr, None)
        if path:
            problem = _output_problem(path, kind)
            if problem:
                return f"{option} {path}: {problem}"
    return None


def _output_problem(path: str, kind: str) -> str | None:
    """Why `path`, a file or a folder to write, cannot be written (one clause), else None."""
    full = os.path.abspath(path)
    if kind == FILE:
        if os.path.isdir(full) or path.endswith(("/", os.sep)):
            return "this names a folder, not a file; give the file to write"
        if os.path.exists(full):
            try:
                os.close(os.open(full, os.O_WRONLY | os.O_APPEND))  # opened as it is, nothing written
            except OSError as exc:
                return f"this file cannot be written ({_why(exc, full)}); give a file you can write"
            return None
        what, folder = "this file", os.path.dirname(full)
    else:
        what, folder = "this folder", full
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{existing} is a file, not a folder"
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        why, fix = _why(exc, existing), f"give a {kind} {'in a folder ' if kind == FILE else ''}you can write"
        if existing == full:
            return f"this folder cannot be written ({why}); {fix}"
        if existing == folder:
            return f"{what} cannot be written, as {existing}, its folder, cannot be written ({why}); {fix}"
        return f"{what} cannot be made, as {existing}, the nearest folder that exists, cannot be written ({why}); {fix}"
    return None


def _why(exc: OSError, path: str) -> str:
    """The reason an OSError gives, but for the kernel's ENOENT on creating a file in a folder that
    exists (/proc does this): the folder is there, so what it says is that no file may be made."""
    if exc.errno == errno.ENOENT and os.path.exists(path):
        return os.strerror(errno.EACCES)
    return exc.strerror or str(exc)


if __name__ == "__main__":
    sys.exit(main())
