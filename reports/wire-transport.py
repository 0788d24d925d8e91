"""The wire protocol's cost, measured side by side in one run: the numpy reference called in this
process, and the same reference served over the protocol by gpt2_conformance.wire.serve, every
array through the pipe (--no-shm) or, as `run --exec` does with a process that takes files, the
suite's read-only tables and the large answers as files in /dev/shm. A round times one call on
every transport back to back; the medians are printed as the Markdown table of reports/wire.md.

    python reports/wire-transport.py [ROUNDS]        (default 7; run it alone on the machine)
    python reports/wire-transport.py threshold       (a bare transfer: the pipe against a file; fresh pages)

The calls: the largest logits the issue names, h_final [3, 1024, 768] -> logits [3, 1024, 50257]
float32 (617 MB back); load_tables at d = 768 and 1600 (154 and 329 MB in); tables() at d = 1600
(329 MB back); and a decode-sized embed (ids [1, 1]), which is the per-call overhead. Each call is
timed until its answer is usable in this process, and once more with a read of every byte of the
answer (a mapped file's pages are touched there, not when the call returns). This process and the
servers run with the suite's own memory settings (gpt2_conformance.run.memory), as a verdict's
processes do."""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

import numpy as np

from gpt2_conformance import registry
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.run import memory
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


def timed(fn, read: bool, repeat: int = 1) -> float:
    """Seconds per call, over `repeat` calls (a read: every byte of each answer summed)."""
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
        if read:
            for a in out if isinstance(out, tuple) else (out,):
                float(np.add.reduce(a, axis=None, dtype=np.float64))
    return (time.perf_counter() - start) / repeat


def measure(cases: dict, rounds: int) -> dict:
    """case -> transport -> list of seconds. A round times one case on every transport back to back, in
    a new order each round, so a ratio is taken between calls that met the same machine (it is shared:
    its speed drifts over seconds, reports/bench/README.md)."""
    times: dict = {case: {t: [] for t in TRANSPORTS} for case in cases}
    for _ in range(rounds):
        for case in random.sample(list(cases), len(cases)):
            for t in random.sample(list(TRANSPORTS), len(TRANSPORTS)):
                fn, read, repeat = cases[case](t)
                times[case][t].append(timed(fn, read, repeat))
    return times


def threshold(repeat: int = 100) -> None:
    """Where a file starts to pay: N bytes from a child process to this one, through a pipe (the child
    writes, this process reads them into a new buffer) or as a new file in /dev/shm (the child writes
    it, this process maps it, reads every byte, removes it); the median of `repeat` transfers, both
    processes alive throughout, as an implementation process and the suite are."""
    import fcntl
    import mmap
    import tempfile

    folder = tempfile.mkdtemp(dir="/dev/shm")
    print("\n| bytes | pipe | file in /dev/shm |\n|---|---|---|")
    for size in (1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28):
        repeat = max(9, min(repeat, (1 << 30) // size))
        payload = np.ones(size, np.uint8)
        to_child_r, to_child_w = os.pipe()
        data_r, data_w = os.pipe()
        for fd in (data_r, data_w):  # the protocol's pipe size (wire/process.py _PIPE_BYTES)
            fcntl.fcntl(fd, 1031, 1 << 20)
        pid = os.fork()
        if pid == 0:  # the child: on each byte from the parent, one transfer ("p": pipe, "f": file NAME)
            for i in range(2 * repeat):
                kind = os.read(to_child_r, 1)
                if kind == b"p":
                    view, done = memoryview(payload), 0
                    while done < size:
                        done += os.write(data_w, view[done:])
                else:
                    with open(os.path.join(folder, f"{i}.bin"), "wb") as f:
                        f.write(payload)
                    os.write(data_w, b"%08d" % i)
            os._exit(0)
        times: dict[str, list[float]] = {"pipe": [], "file": []}
        for _ in range(repeat):
            for kind in random.sample(["pipe", "file"], 2):
                start = time.perf_counter()
                os.write(to_child_w, kind[:1].encode())
                if kind == "pipe":
                    buffer, got = np.empty(size, np.uint8), 0
                    while got < size:
                        got += os.readv(data_r, [buffer.data[got:]])
                    int(buffer.sum())
                else:
                    path = os.path.join(folder, f"{int(os.read(data_r, 8))}.bin")
                    with open(path, "rb") as f:
                        mapped = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
                    os.unlink(path)
                    int(np.frombuffer(mapped, np.uint8).sum())
                    mapped.close()
                times[kind].append(time.perf_counter() - start)
        os.waitpid(pid, 0)
        for fd in (to_child_r, to_child_w, data_r, data_w):
            os.close(fd)
        cells = [f"{statistics.median(times[k]) * 1e3:.3f} ms" for k in ("pipe", "file")]
        print(f"| {size // 1024} KiB ({repeat} transfers) | " + " | ".join(cells) + " |")
    os.rmdir(folder)


def pages(size: int = 329_000_000, repeat: int = 3) -> None:
    """What fresh memory costs here: an array of `size` bytes filled in new anonymous memory, and a
    new file of /dev/shm filled by write() or through a mapping of it (the median of `repeat`)."""
    import mmap
    import tempfile

    source = np.ones(size, np.uint8)
    folder = tempfile.mkdtemp(dir="/dev/shm")
    path = os.path.join(folder, "pages.bin")

    def anonymous():
        np.empty(size, np.uint8)[:] = source

    def written():
        with open(path, "wb") as f:
            f.write(source.data)

    def mapped():
        with open(path, "w+b") as f:
            f.truncate(size)
            with mmap.mmap(f.fileno(), size) as m:
                m[:] = source.data

    print(f"\n{size / 1e6:.0f} MB, median of {repeat}:")
    for fill in (anonymous, written, mapped):
        times = []
        for _ in range(repeat):
            if os.path.exists(path):
                os.unlink(path)
            start = time.perf_counter()
            fill()
            times.append(time.perf_counter() - start)
        print(f"  {fill.__name__}: {statistics.median(times):.3f} s")
    os.unlink(path)
    os.rmdir(folder)


def main() -> int:
    # as in the suite's own processes: freed blocks kept in the heap, small pages (run/memory.py says
    # why); the servers inherit it, as an implementation process inherits it from a suite child
    os.environ.update(memory.child_env())
    memory.keep_freed_memory()
    if sys.argv[1:2] == ["threshold"]:
        threshold()
        pages()
        return 0
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
        "logits [3, 1024, 768] -> [3, 1024, 50257]": lambda t: (lambda: small[t].logits(h), False, 1),
        "the same, every byte of the answer read": lambda t: (lambda: small[t].logits(h), True, 1),
        "load_tables d = 768 (154 MB in)": lambda t: (lambda: small[t].load_tables(*tables768), False, 1),
        "load_tables d = 1600 (329 MB in)": lambda t: (lambda: large[t].load_tables(*tables1600), False, 1),
        "tables() d = 1600 (329 MB back), read": lambda t: (lambda: large[t].tables(), True, 1),
        "embed ids [1, 1] (one decode step), 50 calls": lambda t: (lambda: small[t].embed(one, 5), False, 50),
    }
    times = measure(cases, rounds)
    print(f"{rounds} rounds. Each cell: the median time per call (its range); for the protocol, the median of")
    print("the rounds' ratios to the in-process call of the same round (their range)\n")
    print("| Call | " + " | ".join(TRANSPORTS) + " |")
    print("|---|" + "---|" * len(TRANSPORTS))
    for case, per in times.items():
        base = per["in-process"]
        unit = (lambda s: f"{s * 1e3:.2f} ms") if statistics.median(base) < 0.1 else (lambda s: f"{s:.3f} s")
        cells = [f"{unit(statistics.median(base))} ({unit(min(base))}-{unit(max(base))})"]
        for t in list(TRANSPORTS)[1:]:
            values = per[t]
            ratios = [v / b for v, b in zip(values, base, strict=True)]
            cells.append(
                f"{unit(statistics.median(values))} ({unit(min(values))}-{unit(max(values))}); "
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
            )
        print(f"| {case} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
