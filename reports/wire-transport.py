"""The wire protocol's cost, measured side by side in one run: the numpy reference called in this
process, and the same reference served over the protocol by gpt2_conformance.wire.serve, its large
arrays through the pipe (--no-shm) or as files in /dev/shm. Each round times every transport once,
in a new order each round; the medians are printed as the Markdown table of reports/wire.md.

    python reports/wire-transport.py [ROUNDS]        (default 7; run it alone on the machine)

The calls: the largest logits the issue names, h_final [3, 1024, 768] -> logits [3, 1024, 50257]
float32 (617 MB back); load_tables at d = 768 and 1600 (154 and 329 MB in); tables() at d = 1600
(329 MB back); and a decode-sized embed (ids [1, 1]), which is the per-call overhead. Each call is
timed until its answer is usable in this process, and once more with a read of every byte of the
answer (a mapped file's pages are touched there, not when the call returns)."""

from __future__ import annotations

import random
import statistics
import sys
import time

import numpy as np

from gpt2_conformance import registry
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.runtime.tables import random_tables
from gpt2_conformance.wire import process

SERVE = [sys.executable, "-m", "gpt2_conformance.wire.serve", "numpy"]
TRANSPORTS = {"in-process": None, "pipe": [*SERVE, "--no-shm"], "shared memory": SERVE}


def adapters(d: int) -> dict:
    numpy_factory = registry.resolve("numpy")
    out = {}
    for name, argv in TRANSPORTS.items():
        factory = numpy_factory if argv is None else process.adapter_class(argv, deadline=600)
        out[name] = factory(AdapterConfig(n_embd=d))
    return out


def timed(fn, read: bool) -> float:
    start = time.perf_counter()
    out = fn()
    if read:
        for a in out if isinstance(out, tuple) else (out,):
            float(np.add.reduce(a, axis=None, dtype=np.float64))
    return time.perf_counter() - start


def measure(cases: dict, rounds: int) -> dict:
    """case -> transport -> list of seconds; each round runs every (case, transport) once, shuffled."""
    times: dict = {case: {t: [] for t in TRANSPORTS} for case in cases}
    for _ in range(rounds):
        order = [(case, t) for case in cases for t in TRANSPORTS]
        random.shuffle(order)
        for case, t in order:
            fn, read = cases[case](t)
            times[case][t].append(timed(fn, read))
    return times


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    rng = np.random.default_rng(0)
    h = rng.standard_normal((3, 1024, 768), dtype=np.float32)
    one = np.array([[17]])
    small, large = adapters(768), adapters(1600)
    tables768, tables1600 = random_tables(768), random_tables(1600)
    for a in small.values():
        a.load_tables(*tables768)
    for a in large.values():
        a.load_tables(*tables1600)
    cases = {
        "logits [3, 1024, 768] -> [3, 1024, 50257]": lambda t: (lambda: small[t].logits(h), False),
        "the same, every byte of the answer read": lambda t: (lambda: small[t].logits(h), True),
        "load_tables d = 768 (154 MB in)": lambda t: (lambda: small[t].load_tables(*tables768), False),
        "load_tables d = 1600 (329 MB in)": lambda t: (lambda: large[t].load_tables(*tables1600), False),
        "tables() d = 1600 (329 MB back), read": lambda t: (lambda: large[t].tables(), True),
        "embed ids [1, 1] (one decode step)": lambda t: (lambda: small[t].embed(one, 5), False),
    }
    times = measure(cases, rounds)
    print(f"{rounds} rounds; median seconds (min-max); ratio to in-process\n")
    print("| Call | " + " | ".join(TRANSPORTS) + " |")
    print("|---|" + "---|" * len(TRANSPORTS))
    for case, per in times.items():
        base = statistics.median(per["in-process"])
        cells = []
        for t, values in per.items():
            med = statistics.median(values)
            ratio = "" if t == "in-process" else f", {med / base:.2f}x"
            unit = (lambda s: f"{s * 1e3:.2f} ms") if base < 0.01 else (lambda s: f"{s:.3f} s")
            cells.append(f"{unit(med)} ({unit(min(values))}-{unit(max(values))}){ratio}")
        print(f"| {case} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
