"""`--exec "CMD [ARGS]"`: a command as the adapter of a run, on every route that takes one.

    gpt2-conformance run --exec "./gpt2_wire"                       # run/command.py
    pytest --pyargs gpt2_conformance.suite --gpt2c-exec "./gpt2_wire"   # pytest_plugin.py
    gpt2-conformance bench --exec "./gpt2_wire"                     # bench/command.py

Each only resolves the command to an adapter spec (wire.process.spec: the command, the folder it
was given in and the per-call deadline, in the spec itself) and hands it on where `--adapter`'s
spec goes: the child processes of `run` and the bench's workers resolve the same spec, so they
start the same command. Nothing else about the run changes.

The command is probed here, once, before anything runs: a command that does not start or whose
hello is not the protocol's is a usage error, one line, as an --adapter that cannot be imported
is. The per-call deadline is half the per-test timeout, so a call that hangs is reported by its
method, with time left before the test's own timeout."""

from __future__ import annotations

import shlex

from gpt2_conformance.wire import process

EXEC_HELP = (
    "a program speaking the wire protocol on its stdin/stdout (docs/any-language.md), as one "
    "quoted string: CMD [ARGS]; it is started in the current folder"
)


def add_arguments(target) -> None:
    """--exec beside --backend/--adapter (one of them)."""
    target.add_argument("--exec", dest="exec_command", metavar='"CMD [ARGS]"', help=EXEC_HELP)


def argv_of(text: str, option: str = "--exec") -> list[str]:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise process.CommandError(f"{option} {text!r}: {exc} (quote it as a shell would)") from None
    if not argv:
        raise process.CommandError(f"{option} {text!r}: the command is empty; give the program to start")
    return argv


def deadline(timeout: float | None) -> float:
    """The per-call deadline for a per-test timeout (None: pytest-timeout's is not set)."""
    return process.DEFAULT_DEADLINE if not timeout else max(timeout / 2, 0.5)


def spec_of(text: str, timeout: float | None, option: str = "--exec") -> str:
    """The adapter spec for a command line, its process probed (CommandError: one line)."""
    spec = process.spec(argv_of(text, option), deadline=deadline(timeout))
    try:
        adapter_class(spec)
    except process.CommandError as exc:
        raise process.CommandError(f"{option} {exc}") from None
    return spec


def adapter_class(spec: str) -> type[process.ProcessAdapter]:
    """The class a command's spec names (probed on first use in this process)."""
    return getattr(process, spec.partition(":")[2])


# -- `run --exec` ---------------------------------------------------------------------------
def problem(args) -> str | None:
    """Why --exec cannot run (one line: the command does not start or does not say hello), else None."""
    text = getattr(args, "exec_command", None)
    if not text:
        return None
    try:
        args.exec_spec = spec_of(text, args.timeout)
    except process.CommandError as exc:
        return str(exc)
    return None


def prepare(args) -> str | None:
    """For --exec: args.adapter is the command's spec; the run's name (exec-IMPLEMENTATION, from its
    hello), or None for any other target."""
    text = getattr(args, "exec_command", None)
    if not text:
        return None
    spec = getattr(args, "exec_spec", None) or spec_of(text, args.timeout)
    args.adapter = spec
    return f"exec-{adapter_class(spec).HELLO['implementation']}"


def target(args) -> str | None:
    """The command-line target that replays a run of a command (its timeout sets the deadline)."""
    text = getattr(args, "exec_command", None)
    return f"--exec {shlex.quote(text)} --timeout {args.timeout:g}" if text else None


# -- `bench --exec` -------------------------------------------------------------------------
def bench_specs(args) -> list[str]:
    """The adapter specs of bench's --exec commands (CommandError: one line), each call's deadline
    half the bench's --timeout."""
    if getattr(args, "exec_commands", None) and getattr(args, "against", None):
        raise process.CommandError("--exec does not apply to the gate: it times --adapter and --against only")
    return [spec_of(text, args.timeout) for text in getattr(args, "exec_commands", None) or ()]


def label(spec: str) -> str | None:
    """How the bench names a command's row (exec IMPLEMENTATION), None for any other spec."""
    if not spec.startswith(f"{process.SPEC_MODULE}:"):
        return None
    return f"exec {adapter_class(spec).HELLO['implementation']}"
