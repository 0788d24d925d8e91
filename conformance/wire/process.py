"""A process as an adapter: ProcessAdapter forwards each adapter method to an implementation
process over the wire protocol (protocol-1.schema.json), so everything the suite does for a
Python adapter (claims, guard, waivers, reports, replays) holds for a program in any language.

How a command becomes an adapter: `spec(argv, cwd, deadline)` names a class of this module, an
attribute made from the command itself ("gpt2_conformance.wire.process:cmd_..."), so `run
--exec CMD` hands its child processes an adapter spec as `--adapter` would, and a bench worker
or the pytest route resolve it the same way. Resolving it starts the process once (the probe):
its hello says what it claims, which becomes the class's Capabilities, read before any adapter
is built, as a Python adapter's class attribute is.

Each adapter instance runs its own process, started with the hello that carries the adapter's
config. A process that breaks the protocol (garbage or noise on stdout, a header that is not
the schema's, a payload shorter than announced, an exit, a crash, no answer before the deadline)
costs the call it happened in: ProtocolBreach, one line naming the call, the field and what came
instead, marked as the adapter's own failure. It is a BaseException so that no clause counts it
as the raise it asks for (BOUNDS asks for an exception: a crash is not one). The process is then
killed, and the next call starts a new one and replays the state the suite gave the old one
(the last load_tables or init_tables, and every assign_wte_row since), so the next clause judges
the implementation, not the wreck of the last one.

An error response is the implementation refusing a call: the exception its kind names is raised
with its message, as a Python adapter raises it (BOUNDS-MESSAGE judges its kind and words).

The deadline is each call's: below the per-test timeout (half of `run --timeout`), so a hang is
reported by the call that hung, then the process is killed."""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import time
import weakref

import numpy as np

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.machine import immutable
from gpt2_conformance.runtime.calls import describe_array, describe_call
from gpt2_conformance.runtime.guard import mark_raised_by_adapter
from gpt2_conformance.wire import protocol, schema

DEFAULT_DEADLINE = 60.0  # seconds per call where no --timeout says otherwise (half pytest-timeout's default 120)
SPEC_MODULE = __name__
_PREFIX = "cmd_"
_PIPE_BYTES = 1 << 20  # F_SETPIPE_SZ: fewer, larger pieces per array (Linux; the default is 64 KiB)
_STDERR_KEPT = 1 << 15  # of the process's stderr in one call: the first and the last this many bytes
_NOT_GIVEN = object()


class ProtocolBreach(BaseException):  # noqa: N818 - a breach, not an error the suite should catch
    """The process broke the protocol (module docstring): the implementation's failure in the call
    it happened in, never a raise a clause asks for."""


class _Broken(Exception):
    """Inside this module: what went wrong, to become a ProtocolBreach naming the call."""


def spec(argv: list[str], cwd: str | None = None, deadline: float = DEFAULT_DEADLINE) -> str:
    """The adapter spec ("module:attribute") of a command: the command, its folder and the per-call
    deadline, carried in the attribute's name, so every process that resolves the spec (a child of
    `run`, a bench worker) starts the same command in the same folder."""
    if not argv:
        raise ValueError("the command is empty: give the program to start, e.g. --exec './gpt2_wire'")
    record = {"argv": list(argv), "cwd": os.path.abspath(cwd or os.getcwd()), "deadline": float(deadline)}
    token = base64.urlsafe_b64encode(json.dumps(record, separators=(",", ":")).encode()).decode().rstrip("=")
    return f"{SPEC_MODULE}:{_PREFIX}{token}"


def _record_of(name: str) -> dict:
    token = name[len(_PREFIX) :]
    try:
        record = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        argv, cwd, deadline = record["argv"], record["cwd"], float(record["deadline"])
    except (ValueError, KeyError, TypeError):
        raise AttributeError(f"{name!r} is not a command this module made (wire.process.spec)") from None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise AttributeError(f"{name!r} is not a command this module made (wire.process.spec)")
    return {"argv": argv, "cwd": str(cwd), "deadline": deadline}


_CLASSES: dict[str, type] = {}


def __getattr__(name: str):
    """cmd_...: the adapter class of the command the name carries (spec()), probed once per process."""
    if not name.startswith(_PREFIX):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _CLASSES:
        record = _record_of(name)
        _CLASSES[name] = adapter_class(record["argv"], record["cwd"], record["deadline"])
    return _CLASSES[name]


class CommandError(ValueError):
    """The command cannot be an adapter: it does not start, or its hello is not the protocol's."""


def adapter_class(argv: list[str], cwd: str | None = None, deadline: float = DEFAULT_DEADLINE) -> type:
    """A ProcessAdapter class for the command, its claims read from the hello of one probe start;
    CommandError (one line) where it does not start or does not say hello."""
    cwd = os.path.abspath(cwd or os.getcwd())
    shown = " ".join(argv)
    try:
        process = _Process(argv, cwd, shared=None)
    except OSError as exc:
        raise CommandError(f"{shown!r}: cannot start {argv[0]!r}: {exc.strerror or exc}") from None
    try:
        hello, _ = process.exchange("hello", {"protocol": protocol.PROTOCOL, "config": None, "shm": None}, [], deadline)
        if not hello["ok"]:
            error = hello["error"]
            raise _Broken(f"its hello is an error: {error['kind']}: {error['message']}")
        capabilities = _capabilities(hello["capabilities"])
    except _Broken as exc:
        raise CommandError(f"{shown!r}: hello: {exc}") from None
    finally:
        process.close()
    waivers = hello.get("waivers")
    return type(
        f"Process_{_slug(hello['implementation'])}",
        (ProcessAdapter,),
        {
            "capabilities": capabilities,
            "ARGV": tuple(argv),
            "CWD": cwd,
            "DEADLINE": deadline,
            "HELLO": hello,
            "WAIVERS": os.path.join(cwd, waivers) if waivers else None,
            "__module__": __name__,
        },
    )


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)[:60] or "process"


def _capabilities(claims: dict) -> Capabilities:
    try:
        return Capabilities(
            dtypes=tuple(claims["dtypes"]),
            devices=tuple(claims["devices"]),
            sizes=tuple(claims["sizes"]),
            kv_cache=claims["kv_cache"],
            tied_head=claims["tied_head"],
            init=claims["init"],
            gradients=claims["gradients"],
            mutable_tables=claims["mutable_tables"],
        )
    except ValueError as exc:
        raise _Broken(f"capabilities: {exc}") from None


class ProcessAdapter(Adapter):
    """Forwards every method to a process of ARGV (module docstring). The class a command's spec
    names is a subclass with the hello's claims; this one claims nothing it could keep."""

    capabilities = Capabilities()
    ARGV: tuple[str, ...] = ()
    CWD: str = ""
    DEADLINE: float = DEFAULT_DEADLINE
    HELLO: dict = {}
    WAIVERS: str | None = None

    @classmethod
    def implementation(cls) -> str:
        hello = cls.HELLO
        return f"{hello.get('implementation', '?')} {hello.get('version', '')}".strip() + (
            f" (a process over the wire protocol {protocol.PROTOCOL}: {' '.join(cls.ARGV)})"
        )

    @classmethod
    def device_available(cls, device: str) -> tuple[bool, str]:
        if device in cls.capabilities.devices:
            return True, ""
        return False, f"{cls.__name__} claims no {device}"

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self._process: _Process | None = None
        self._journal: list[tuple[str, dict, list]] = []  # what to replay into a new process
        self._errors: dict[str, type] = {}
        self._start("__init__", f"building the adapter with {config}")

    # -- the process ------------------------------------------------------------------
    def _start(self, method: str, call: str) -> None:
        """A new process, said hello with this adapter's config, given the state the old one had."""
        shared = _shared_folder()
        try:
            process = _Process(list(self.ARGV), self.CWD, shared)
        except OSError as exc:
            raise self._breach(
                method, call, f"{method}: cannot start {self.ARGV[0]!r}: {exc.strerror or exc}"
            ) from None
        self._process = process
        self._finalizer = weakref.finalize(self, process.close)
        config = {"n_embd": self.config.n_embd, "dtype": self.config.dtype, "device": self.config.device}
        fields = {"protocol": protocol.PROTOCOL, "config": config, "shm": shared.path if shared else None}
        hello = self._exchange("hello", call, fields, [], during=method)
        if not hello["ok"]:
            self._stop()
            raise self._refusal(hello["error"], method, call)
        process.files = bool(hello.get("shm")) and shared is not None
        self._errors = {name: _error_class(name, kind) for name, kind in hello.get("errors", {}).items()}
        for journal_method, journal_fields, arrays in self._journal:
            answer = self._exchange(journal_method, call, journal_fields, arrays, during=method)
            if not answer["ok"]:
                error = answer["error"]
                self._stop()
                raise self._breach(
                    method,
                    call,
                    f"{journal_method} (replayed into a new process for {method}): the same call answered "
                    f"{error['kind']}: {error['message']} this time",
                )

    def _stop(self) -> None:
        if self._process is not None:
            self._finalizer.detach()
            self._process.kill()
            self._process = None

    def _exchange(self, method: str, call: str, fields: dict, arrays: list, during: str) -> dict:
        """One request and its response header (its arrays in "arrays": numpy, native byte order).
        `during`: the adapter method the suite called, which a breach is reported against."""
        assert self._process is not None
        try:
            header, out = self._process.exchange(method, fields, arrays, self.DEADLINE)
        except _Broken as exc:
            self._stop()
            note = ""
            if method != during and during != "__init__":
                note = (
                    f" (a new process for {during})"
                    if method == "hello"
                    else f" (replayed into a new process for {during})"
                )
            raise self._breach(during, call, f"{method}{note}: {exc}") from None
        except BaseException:  # interrupted mid-message (a per-test timeout, Ctrl-C): the stream is lost
            self._stop()
            raise
        if header["ok"]:
            header["arrays"] = out
        return header

    def _call(self, method: str, call: str, fields: dict, arrays: list) -> dict:
        if self._process is None:
            self._start(method, call)
        answer = self._exchange(method, call, fields, arrays, during=method)
        if not answer["ok"]:
            raise self._refusal(answer["error"], method, call)
        return answer

    def _breach(self, method: str, call: str, text: str) -> ProtocolBreach:
        exc = ProtocolBreach(text)
        mark_raised_by_adapter(exc, method, call)
        return exc

    def _refusal(self, error: dict, method: str, call: str) -> BaseException:
        kind = error["kind"]
        cls = self._errors.get(kind) or protocol.ERROR_KINDS.get(kind)
        if cls is None:
            self._stop()
            return self._breach(
                method,
                call,
                f"{method}: response.error.kind: {kind!r} is not {', '.join(protocol.ERROR_KINDS)} nor a name the "
                "hello's errors map",
            )
        return cls(error["message"])

    # -- the adapter protocol -------------------------------------------------------------
    def load_tables(self, wte, wpe):
        call = describe_call("load_tables", wte=describe_array(wte), wpe=describe_array(wpe))
        arrays = [("wte", wte), ("wpe", wpe)]
        self._call("load_tables", call, {}, arrays)
        self._journal = [("load_tables", {}, [(name, _kept(a)) for name, a in arrays])]

    def init_tables(self, seed):
        fields = {"seed": protocol.scalar(seed, "seed")}
        self._call("init_tables", f"init_tables(seed={seed!r})", fields, [])
        self._journal = [("init_tables", fields, [])]

    def assign_wte_row(self, index, values):
        fields = {"index": protocol.scalar(index, "index")}
        self._call(
            "assign_wte_row",
            f"assign_wte_row({index!r}, values={describe_array(values)})",
            fields,
            [("values", values)],
        )
        self._journal.append(("assign_wte_row", fields, [("values", np.array(values))]))

    def tables(self):
        wte, wpe = self._call("tables", "tables()", {}, [])["arrays"]
        return wte, wpe

    def parameters(self):
        return {
            name: tuple(shape) for name, shape in self._call("parameters", "parameters()", {}, [])["parameters"].items()
        }

    def embed(self, ids, past_length=_NOT_GIVEN):
        if past_length is _NOT_GIVEN:  # embed(ids): the implementation's own default
            call, fields = describe_call("embed", ids), {}
        else:
            call, fields = (
                describe_call("embed", ids, past_length),
                {"past_length": protocol.scalar(past_length, "past_length")},
            )
        (h,) = self._call("embed", call, fields, [("ids", ids)])["arrays"]
        return h

    def logits(self, h_final):
        call = describe_call("logits", h_final=describe_array(h_final))
        (logits,) = self._call("logits", call, {}, [("h_final", h_final)])["arrays"]
        return logits

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        call = describe_call(
            "gradients",
            ids,
            past_length,
            cotangent_h=describe_array(cotangent_h),
            cotangent_logits=describe_array(cotangent_logits),
        )
        fields = {"past_length": protocol.scalar(past_length, "past_length")}
        arrays = [("ids", ids), ("cotangent_h", cotangent_h), ("cotangent_logits", cotangent_logits)]
        grad_wte, grad_wpe = self._call("gradients", call, fields, arrays)["arrays"]
        return grad_wte, grad_wpe


def _kept(array) -> np.ndarray:
    """An array the journal may replay later: the caller's own when nothing can change it, else a copy."""
    return array if isinstance(array, np.ndarray) and immutable(array) else np.array(array, copy=True)


_ERROR_CLASSES: dict[tuple[str, str], type] = {}


def _error_class(name: str, kind: str) -> type:
    """The implementation's own error name as an exception class of the kind it maps to (so a report
    says "raised TokenOutOfRange (IndexError)", as it names a Python adapter's own class)."""
    base = protocol.ERROR_KINDS[kind]
    if name == kind:
        return base
    if (name, kind) not in _ERROR_CLASSES:
        _ERROR_CLASSES[(name, kind)] = type(name, (base,), {"__module__": "gpt2_conformance.wire.errors"})
    return _ERROR_CLASSES[(name, kind)]


_SHARED: list[protocol.SharedFolder] = []


def _shared_folder() -> protocol.SharedFolder | None:
    """This process's shared folder (made on first use; a forked worker makes its own)."""
    if _SHARED and _SHARED[0].owner == os.getpid():
        return _SHARED[0]
    if os.environ.get("GPT2C_WIRE_NO_SHM") or not protocol.shared_folder_available():
        return None
    import atexit

    folder = protocol.SharedFolder()
    _SHARED[:] = [folder]
    atexit.register(folder.close)
    return folder


def _death(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class _Process:
    """One running process, its three pipes, and the shared folder its large arrays go through.
    Single-threaded: every wait is a poll() on the pipes, bounded by the call's deadline; the
    process's stderr is read while waiting, passed on to this process's stderr (the run's log)
    and its first and last lines kept for the message of a call that breaks."""

    def __init__(self, argv: list[str], cwd: str, shared: protocol.SharedFolder | None):
        self.argv, self.shared, self.files = argv, shared, False
        # its own session: a kill reaches whatever it started (a shell script's program)
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.stdin, self.stdout, self.stderr = (
            self.proc.stdin.fileno(),
            self.proc.stdout.fileno(),
            self.proc.stderr.fileno(),
        )
        for fd in (self.stdin, self.stdout, self.stderr):
            os.set_blocking(fd, False)
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)
        self.pending = bytearray()  # read from stdout, not used yet
        self.err_head, self.err_tail = bytearray(), bytearray()
        self.stdout_closed = self.stderr_closed = False

    # -- one call ---------------------------------------------------------------------
    def exchange(self, method: str, fields: dict, arrays: list, deadline_s: float) -> tuple[dict, list]:
        end = time.monotonic() + deadline_s
        self.err_head.clear()
        self.err_tail.clear()
        descs, payloads = [], []
        for name, array in arrays:
            desc, payload = protocol.describe(name, array)
            if self.files and self.shared is not None and payload.nbytes >= protocol.SHM_MIN_BYTES and immutable(array):
                desc["file"] = self.shared.file_for(array, payload)  # the suite's tables: one file for every load
            else:
                payloads.append(payload)
            descs.append(desc)
        header = json.dumps(protocol.request(method, fields, descs), separators=(",", ":")).encode()
        self._send([memoryview(header + b"\n"), *payloads], end, deadline_s)
        response = self._header(method, end, deadline_s)
        out = self._arrays(response, end, deadline_s) if response["ok"] else []
        self._quiet()
        return response, out

    def _send(self, pieces: list[memoryview], end: float, deadline_s: float) -> None:
        total = sum(p.nbytes for p in pieces)
        sent = 0
        for piece in pieces:
            done = 0
            while done < piece.nbytes:
                self._wait(
                    self.stdin,
                    select.POLLOUT,
                    end,
                    lambda sent=sent: f"the process took {sent} of the request's {total} bytes",
                    deadline_s,
                )
                try:
                    n = os.write(self.stdin, piece[done : done + _PIPE_BYTES])
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    death = self._death(wait=True)
                    while not self.stdout_closed and len(self.pending) < protocol.MAX_HEADER:
                        self._read_some()  # what it wrote before it went, if anything
                    wrote = f", having written {_quote(self.pending)}" if self.pending else ""
                    raise _Broken(
                        f"the process closed its stdin after {sent} of the request's {total} bytes: it "
                        f"{death}{wrote}{self._stderr_said()}"
                    ) from None
                done += n
                sent += n

    def _header(self, method: str, end: float, deadline_s: float) -> dict:
        while b"\n" not in self.pending:
            if len(self.pending) >= protocol.MAX_HEADER:
                raise _Broken(
                    f"the response header is longer than {protocol.MAX_HEADER} bytes without a newline: "
                    f"{_quote(self.pending)}"
                )
            if self.stdout_closed:
                got = (
                    f"the response header ends after {len(self.pending)} bytes ({_quote(self.pending)})"
                    if self.pending
                    else "no response"
                )
                raise _Broken(f"{got}: the process {self._death(wait=True)}{self._stderr_said()}")
            self._wait(
                self.stdout,
                select.POLLIN,
                end,
                lambda: (
                    "no response" if not self.pending else f"the response header stops after {len(self.pending)} bytes"
                ),
                deadline_s,
            )
            self._read_some()
        cut = self.pending.index(b"\n")
        line = bytes(self.pending[:cut])
        del self.pending[: cut + 1]
        try:
            header = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _Broken(
                f"the response header is not JSON: {_quote(line)} (stdout carries the protocol only: a process "
                "writes its own output to stderr)"
            ) from None
        if not isinstance(header, dict):
            raise _Broken(f"the response header is a JSON {schema._type_name(header)}, not an object: {_quote(line)}")
        try:
            if header.get("ok") is False:
                schema.validate(header, "#/$defs/error")
            else:
                schema.validate(header, f"#/$defs/responses/{method}")
        except schema.SchemaViolation as exc:
            raise _Broken(str(exc)) from None
        return header

    def _arrays(self, response: dict, end: float, deadline_s: float) -> list[np.ndarray]:
        out, files = [], [d["file"] for d in response.get("arrays", []) if "file" in d]
        try:
            for desc in response.get("arrays", []):
                try:
                    protocol.check_nbytes(desc)
                except protocol.WireError as exc:
                    raise _Broken(str(exc)) from None
                if "file" in desc:
                    out.append(self._from_file(desc))
                else:
                    out.append(self._from_stream(desc, end, deadline_s))
        finally:
            if self.shared is not None:
                for name in files:
                    self.shared.remove(name)
        return out

    def _from_file(self, desc: dict) -> np.ndarray:
        if self.shared is None or not self.files:
            raise _Broken(f"array {desc['name']!r} is in a file, but no shared folder was offered to this process")
        try:
            buffer = protocol.map_file(self.shared.file(desc["file"]), desc["nbytes"])
        except protocol.WireError as exc:
            raise _Broken(f"array {desc['name']!r}: {exc}") from None
        return protocol.from_bytes(desc, buffer)

    def _from_stream(self, desc: dict, end: float, deadline_s: float) -> np.ndarray:
        nbytes = desc["nbytes"]
        buffer = np.empty(nbytes, np.uint8)
        view = buffer.data
        got = min(nbytes, len(self.pending))
        view[:got] = self.pending[:got]
        del self.pending[:got]
        while got < nbytes:
            if self.stdout_closed:
                raise _Broken(
                    f"array {desc['name']!r} is short: {got} of its {nbytes} bytes, then the process "
                    f"{self._death(wait=True)}{self._stderr_said()}"
                )
            self._wait(
                self.stdout,
                select.POLLIN,
                end,
                lambda got=got: f"array {desc['name']!r} stops at {got} of its {nbytes} bytes",
                deadline_s,
            )
            try:
                n = os.readv(self.stdout, [view[got:]])
            except BlockingIOError:
                continue
            if n == 0:
                self.stdout_closed = True
            got += n
        return protocol.from_bytes(desc, buffer)

    def _quiet(self) -> None:
        """Nothing may follow a response before the next request: more bytes now break this call."""
        self._drain_stderr()
        if not self.pending and not self.stdout_closed and select.select([self.stdout], [], [], 0)[0]:
            self._read_some()
        if self.pending:
            raise _Broken(
                f"{len(self.pending)} byte(s) follow the response that no header announced: {_quote(self.pending)}"
            )

    # -- waiting ------------------------------------------------------------------------
    def _wait(self, fd: int, event: int, end: float, what, deadline_s: float) -> None:
        """Until `fd` is ready for `event`, reading stderr meanwhile (and stdout, while writing: a
        process may answer before it has read all of a request it refuses). _Broken at the deadline."""
        while True:
            left = end - time.monotonic()
            if left <= 0:
                self.kill()
                raise _Broken(
                    f"{what()} within {deadline_s:g} s (the per-call deadline, below the per-test timeout): "
                    f"the process was killed{self._stderr_said()}"
                )
            poller = select.poll()
            poller.register(fd, event)
            if not self.stderr_closed:
                poller.register(self.stderr, select.POLLIN)
            if fd != self.stdout and not self.stdout_closed:
                poller.register(self.stdout, select.POLLIN)
            ready = dict(poller.poll(min(left, 1.0) * 1000))
            if self.stderr in ready:
                self._drain_stderr()
            if fd != self.stdout and self.stdout in ready:
                if len(self.pending) > protocol.MAX_HEADER + (1 << 26):
                    raise _Broken("the process answers without reading the request")
                self._read_some()
            if fd in ready:
                if ready[fd] & (select.POLLERR | select.POLLNVAL) and event == select.POLLOUT:
                    return  # the write will say what happened (EPIPE)
                return
            if fd == self.stdout and self.stdout_closed:
                return

    def _read_some(self) -> None:
        try:
            data = os.read(self.stdout, 1 << 20)
        except BlockingIOError:
            return
        if not data:
            self.stdout_closed = True
        self.pending += data

    def _drain_stderr(self) -> None:
        while not self.stderr_closed:
            try:
                data = os.read(self.stderr, 1 << 16)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    self.stderr_closed = True
                    return
                raise
            if not data:
                self.stderr_closed = True
                return
            with contextlib.suppress(OSError):
                os.write(2, data)  # the run's log
            room = _STDERR_KEPT - len(self.err_head)
            self.err_head += data[:room]
            self.err_tail = (self.err_tail + data[room:])[-_STDERR_KEPT:]

    def _stderr_said(self) -> str:
        self._drain_stderr()
        text = (self.err_head + b"\n" + self.err_tail).decode("utf-8", "replace")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if not lines:
            return ""
        marked = [ln for ln in lines if any(w in ln for w in ("ERROR", "Error", "error", "panicked", "fault", "Abort"))]
        line = (marked or lines)[0] if marked else lines[-1]
        return f"; its stderr says: {line[:240]}"

    def _death(self, wait: bool) -> str:
        try:
            code = self.proc.wait(timeout=2.0) if wait else self.proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        return _death(code)

    # -- the end ------------------------------------------------------------------------
    def close(self) -> None:
        """Its stdin closes (a process ends at the end of its stdin); killed if it does not."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        self._drain_stderr()
        self._close_pipes()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        self._drain_stderr()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]
        self.stdout_closed = self.stderr_closed = True


def _quote(data: bytes | bytearray, limit: int = 60) -> str:
    text = repr(bytes(data[:limit]))[1:]
    return text + ("..." if len(data) > limit else "")
