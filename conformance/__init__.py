"""gpt2-conformance: a conformance and parity suite for GPT-2's token + position embedding and
its tied output head.

The repository keeps this package in conformance/ and the adapters in backends/; installed, both
live under the one import name gpt2_conformance (setup.py maps the folders):

    gpt2_conformance.api       the adapter protocol a backend implements (numpy in, numpy out)
    gpt2_conformance.spec      the clauses, with IDs and sources; results: their verdicts
    gpt2_conformance.registry  the one place that reads the backend list (backends/__init__.py)
    gpt2_conformance.runtime   what the suite runs on: fixtures, guard, oracles, assertions
    gpt2_conformance.suite     the clause tests, one module per spec group
    gpt2_conformance.run       running a backend: child processes, reports, waivers, parity
    gpt2_conformance.merge     many runs into one matrix, parity table and scoreboard
    gpt2_conformance.golden    the real GPT-2 data and checkpoint readers
    gpt2_conformance.bench     timing every backend on the same work
    gpt2_conformance.backends  the built-in adapters, one folder each
"""

__version__ = "0.1.0"
