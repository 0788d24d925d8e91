"""Serve a Python adapter over the wire protocol: the other end of ProcessAdapter, in Python.

    gpt2-conformance wire serve numpy                       # a built-in backend by name
    gpt2-conformance wire serve my_gpt2_adapter:MyAdapter   # or any adapter spec
    python -m gpt2_conformance.wire.serve numpy [--no-shm]

A built-in backend's hello names its waiver file (or --waivers FILE), so `run --exec` applies the
waivers `run --backend` does.

What it is for: `run --exec "gpt2-conformance wire serve numpy"` judges the numpy reference through
the protocol, which must give the verdicts the reference gets in-process (the check that the wire
loses nothing), and it is the transport's measure (reports/wire.md: the same reference served over
the pipe, over shared memory and called in-process). It is also a template for a server in front
of something that is not Python.

The adapter runs as the suite would run it: its exceptions become error responses (the kind its
class derives from, or the api's own error names, which the hello maps), its arrays are sent as
they come back. stdout carries the protocol only: the file descriptor is kept for it, and what
anything else writes to stdout goes to stderr."""

from __future__ import annotations

import argparse
import io
import json
import mmap
import os
import sys
from typing import Any

import numpy as np

from gpt2_conformance.wire import protocol

# the api's own errors (gpt2_conformance.api.errors), named in the hello so that a report names them
# as it does in-process ("raised TokenIdOutOfRangeError (IndexError)")
_API_ERRORS = {
    "PositionOutOfRangeError": "IndexError",
    "TokenIdOutOfRangeError": "IndexError",
    "EmbeddingInputError": "ValueError",
    "TableShapeError": "ValueError",
}


def _kind(exc: BaseException) -> str:
    """An error response's kind: the exception's own name where the hello maps it, else the first
    of the protocol's kinds it derives from (RuntimeError for anything else)."""
    name = type(exc).__name__
    if name in _API_ERRORS and isinstance(exc, protocol.ERROR_KINDS[_API_ERRORS[name]]):
        return name
    return next((kind for kind, cls in protocol.ERROR_KINDS.items() if isinstance(exc, cls)), "RuntimeError")


class Server:
    def __init__(self, factory, name: str, files: bool = True, waivers: str | None = None):
        from gpt2_conformance.api.adapter import capabilities_of

        self.factory, self.name, self.offer_files, self.waivers = factory, name, files, waivers
        self.capabilities = capabilities_of(factory)
        self.adapter: Any = None
        self.shared: str | None = None
        self.count = 0
        self.stdin = io.BufferedReader(io.FileIO(0, "rb", closefd=False), 1 << 16)
        self.out = os.fdopen(os.dup(1), "wb", buffering=0)
        os.dup2(2, 1)  # a print of the adapter's goes to stderr, never into the protocol

    def serve(self) -> int:
        while True:
            line = self.stdin.readline(protocol.MAX_HEADER)
            if not line:
                return 0
            request = json.loads(line)
            arrays = [self._receive(desc) for desc in request.get("arrays", [])]
            try:
                header, out = self.handle(request, arrays)
            except Exception as exc:  # noqa: BLE001 - whatever the adapter raised is its error response
                header, out = {"ok": False, "error": {"kind": _kind(exc), "message": str(exc)}}, []
            self._send(header, out)

    def handle(self, request: dict, arrays: list[np.ndarray]) -> tuple[dict, list]:
        from gpt2_conformance.api.adapter import AdapterConfig

        call = request["call"]
        if call == "hello":
            return self._hello(request, AdapterConfig), []
        adapter = self.adapter
        if call == "load_tables":
            adapter.load_tables(*arrays)
        elif call == "init_tables":
            adapter.init_tables(protocol.from_scalar(request["seed"]))
        elif call == "assign_wte_row":
            adapter.assign_wte_row(protocol.from_scalar(request["index"]), arrays[0])
        elif call == "parameters":
            return {"ok": True, "parameters": {k: [int(n) for n in v] for k, v in adapter.parameters().items()}}, []
        elif call == "tables":
            return {"ok": True}, list(zip(("wte", "wpe"), adapter.tables(), strict=True))
        elif call == "embed":
            args = [protocol.from_scalar(request["past_length"])] if "past_length" in request else []
            return {"ok": True}, [("h", adapter.embed(arrays[0], *args))]
        elif call == "logits":
            return {"ok": True}, [("logits", adapter.logits(arrays[0]))]
        elif call == "gradients":
            grads = adapter.gradients(arrays[0], protocol.from_scalar(request["past_length"]), arrays[1], arrays[2])
            return {"ok": True}, list(zip(("grad_wte", "grad_wpe"), grads, strict=True))
        else:
            raise ValueError(f"unknown call {call!r}")
        return {"ok": True}, []

    def _hello(self, request: dict, config_type) -> dict:
        from importlib import metadata

        config = request.get("config")
        self.shared = request.get("shm") if self.offer_files else None
        if config is not None:
            self.adapter = self.factory(config_type(**config))
        caps = self.capabilities
        return {
            "ok": True,
            "protocol": protocol.PROTOCOL,
            "implementation": f"{self.name} (served by gpt2_conformance.wire.serve)",
            "version": metadata.version("gpt2-conformance"),
            "capabilities": {
                "dtypes": list(caps.dtypes),
                "devices": list(caps.devices),
                "sizes": list(caps.sizes),
                "kv_cache": caps.kv_cache,
                "tied_head": caps.tied_head,
                "init": caps.init,
                "gradients": caps.gradients,
                "mutable_tables": caps.mutable_tables,
            },
            "errors": dict(_API_ERRORS),
            "shm": self.shared is not None,
        } | ({"waivers": os.path.abspath(self.waivers)} if self.waivers else {})

    # -- arrays ---------------------------------------------------------------------------
    def _receive(self, desc: dict) -> np.ndarray:
        if "file" in desc:  # mapped read-only: nothing copied; an adapter that keeps it may (the file never changes)
            path = os.path.join(self.shared or "", desc["file"])
            with open(path, "rb") as f:
                mapped = mmap.mmap(f.fileno(), desc["nbytes"], access=mmap.ACCESS_READ) if desc["nbytes"] else b""
            return protocol.from_bytes(desc, mapped)
        buffer = bytearray(desc["nbytes"])
        view, got = memoryview(buffer), 0
        while got < desc["nbytes"]:
            n = self.stdin.readinto(view[got:])
            if not n:
                raise EOFError("the request ended inside an array")
            got += n
        return protocol.from_bytes(desc, buffer)

    def _send(self, header: dict, arrays: list) -> None:
        descs, payloads = [], []
        for name, array in arrays:
            desc, payload = protocol.describe(name, np.asarray(array))
            if self.shared and payload.nbytes >= protocol.SHM_MIN_BYTES:
                desc["file"] = self._file(payload)
            else:
                payloads.append(payload)
            descs.append(desc)
        if arrays:
            header = {**header, "arrays": descs}
        self.out.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        for payload in payloads:
            done = 0
            while done < payload.nbytes:
                done += self.out.write(payload[done:])

    def _file(self, payload: memoryview) -> str:
        self.count += 1
        name = f"p{os.getpid()}-{self.count}.bin"
        assert self.shared is not None
        # write(), not a copy into a mapping: a mapping's pages are zeroed on their first touch, then copied over
        fd = os.open(os.path.join(self.shared, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            done = 0
            while done < payload.nbytes:
                done += os.write(fd, payload[done : done + (1 << 30)])
        finally:
            os.close(fd)
        return name


def add_arguments(parser) -> None:
    parser.add_argument("adapter", help="a backend name (gpt2-conformance list) or package.module:factory")
    parser.add_argument("--no-shm", action="store_true", help="every array through the pipe, none as a file, both ways")
    parser.add_argument(
        "--waivers", metavar="FILE", help="the waiver file the hello names (default: a built-in backend's own, if any)"
    )


def serve(args) -> int:
    from gpt2_conformance import registry

    try:
        factory = registry.resolve(args.adapter)
    except (ImportError, LookupError, ValueError, TypeError) as exc:
        print(f"gpt2-conformance wire serve: error: {exc}", file=sys.stderr)
        return 2
    try:
        waivers = args.waivers or registry.waivers_file(args.adapter, factory)
        return Server(factory, args.adapter, not args.no_shm, waivers).serve()
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpt2_conformance.wire.serve", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
