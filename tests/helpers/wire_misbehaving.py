"""A process that breaks the wire protocol in one way, on one call: the numpy reference served by
gpt2_conformance.wire.serve, except that every request for METHOD is answered by MODE. Everything
else is answered correctly, so a run shows the breach costing the clause it happened in while
the clauses after it, in a new process, pass.

    python tests/helpers/wire_misbehaving.py MODE [METHOD]     (METHOD: embed by default)

The hello modes misbehave only on the hello of an adapter of d = 1024 (SHAPE-TABLES' 355M case),
so the suite's probe and every other adapter start as they should."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np

from gpt2_conformance import registry
from gpt2_conformance.wire import protocol, serve

MODES = {
    # mode: (what it does, the words the suite's line must hold)
    "garbage": "writes a line that is not JSON where the header belongs",
    "bad-header": "a JSON header whose array shape is a string",
    "truncated-header": "half a header, then exits",
    "short-payload": "the header, half of the array's bytes, then exits",
    "wrong-dtype": "announces float64 for the float32 bytes it sends",
    "wrong-shape": "announces a shape the bytes do not have",
    "noise-before-hello": "prints a line on stdout before its hello",
    "exit": "exits without answering",
    "hang": "never answers",
    "crash": "dies of SIGSEGV",
    "unknown-error": "answers an error of a kind the protocol does not have",
    "trailing-bytes": "writes bytes after the response that no header announced",
}


class Misbehaving(serve.Server):
    def __init__(self, factory, mode: str, method: str):
        super().__init__(factory, "numpy (misbehaving)")
        self.mode, self.method, self.current = mode, method, ""

    def handle(self, request, arrays):
        self.current = request["call"]
        header, out = super().handle(request, arrays)
        hello_case = request["call"] == "hello" and (request.get("config") or {}).get("n_embd") == 1024
        if self.mode == "noise-before-hello" and hello_case:
            self.out.write(b"loading weights... done\n")
        if request["call"] != self.method:
            return header, out
        if self.mode == "exit":
            os._exit(3)
        if self.mode == "hang":
            time.sleep(3600)
        if self.mode == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.mode == "unknown-error":
            return {"ok": False, "error": {"kind": "Boom", "message": "it went boom"}}, []
        return header, out

    def _send(self, header, arrays):
        if (
            not arrays
            or self.current != self.method
            or self.mode
            not in {
                "garbage",
                "bad-header",
                "truncated-header",
                "short-payload",
                "wrong-dtype",
                "wrong-shape",
                "trailing-bytes",
            }
        ):
            return super()._send(header, arrays)
        name, array = arrays[0]
        desc, payload = protocol.describe(name, np.asarray(array))
        if self.mode == "wrong-dtype":
            desc["dtype"] = "float64"
        if self.mode == "wrong-shape":
            desc["shape"] = [*desc["shape"][:-1], desc["shape"][-1] + 1]
        if self.mode == "bad-header":
            desc["shape"] = "x".join(map(str, desc["shape"]))
        line = json.dumps({**header, "arrays": [desc]}).encode() + b"\n"
        if self.mode == "garbage":
            self.out.write(b"h = [[0.1, 0.2, ...]]\n")
        elif self.mode == "truncated-header":
            self.out.write(line[: len(line) // 2])
            os._exit(0)
        elif self.mode == "short-payload":
            self.out.write(line)
            self.out.write(payload[: payload.nbytes // 2])
            os._exit(0)
        else:
            self.out.write(line)
            self.out.write(payload)
            if self.mode == "trailing-bytes":
                self.out.write(b"and some more")


def main() -> int:
    mode, method = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "embed")
    if mode not in MODES:
        print(f"unknown mode {mode!r}; modes: {', '.join(MODES)}", file=sys.stderr)
        return 2
    if mode == "noise-before-hello":
        method = "hello"
    try:
        return Misbehaving(registry.resolve("numpy"), mode, method).serve()
    except (EOFError, BrokenPipeError):
        return 0


if __name__ == "__main__":
    sys.exit(main())
