"""The NumPy reference backend: the spec's formulas, with the spec's input checks."""

from gpt2_conformance.api.backend import REFERENCE, Backend, BenchMode

BACKEND = Backend(
    name="numpy",
    adapter="adapter:NumpyAdapter",
    requires=("numpy",),
    kind=REFERENCE,
    wraps="`np.take` + broadcast add, BLAS head",
    extra="",
    bench="bench",
    bench_modes={
        "suite": BenchMode(
            about="NumpyAdapter: host range check, np.take(mode='clip') + in-place add, one piece per core "
            "(fresh output)",
            check="on (host min/max before the gather)",
        ),
        "take-out": BenchMode(
            about="host range check, np.take(mode='clip', out=) + np.add(out=) into a preallocated buffer, one thread",
            check="on (host min/max before the gather)",
            kinds=("forward",),
        ),
        "fancy": BenchMode(
            about="host range check, wte[ids] + wpe[p:p+T] (fancy indexing)",
            check="on (host min/max before the gather)",
            kinds=("forward",),
        ),
        "nocheck": BenchMode(
            about="forward only: the suite mode's np.take(mode='clip') + add, one piece per core, no check "
            "(comparison only)",
            check="OFF (comparison only)",
            kinds=("forward",),
        ),
    },
)
