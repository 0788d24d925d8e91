"""Cross-backend parity: the same inputs through every backend, compared with the NumPy
reference. The suite's own child process computes the run's fingerprint (below) after the last
clause, on the framework it already imported (conformance/run/events.py); `run` stores it in
its JSON report and `merge` compares it across machines, devices and versions.

Inputs: the suite's tables (seeded), a prefill of 1024 tokens from past_length 0, the cached
decode of the last 24 positions, and the tied logits of 8 unit-scale h vectors. Expected: the
float32 embedding agrees bit for bit (max |diff| exactly 0); logits differ only by summation order.
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig

CASES = ("h_prefill", "h_decode", "logits")


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2019)
    ids = rng.integers(0, gpt2.N_VOCAB, (2, gpt2.N_CTX))
    ids[0, :3] = [0, gpt2.N_VOCAB - 1, 32768]
    h = rng.standard_normal((2, 4, gpt2.N_EMBD_SMALL), dtype=np.float32)
    return {"ids": ids, "h": h}


NEEDS = {"h_decode": "kv_cache", "logits": "tied_head"}  # the claim each case needs (h_prefill: none)


def outputs(factory, device: str = "cpu") -> dict[str, np.ndarray]:
    """The cases the adapter claims (behind the suite's guard: nothing unclaimed is called)."""
    from gpt2_conformance.api.adapter import capabilities_of
    from gpt2_conformance.runtime.guard import GuardedFactory
    from gpt2_conformance.runtime.tables import random_tables

    caps = capabilities_of(factory)
    adapter = GuardedFactory(factory, caps)(AdapterConfig(device=device))
    adapter.load_tables(*random_tables(gpt2.N_EMBD_SMALL))
    x = inputs()
    ids = x["ids"]
    out = {"h_prefill": np.asarray(adapter.embed(ids, 0))}
    if caps.claims(NEEDS["h_decode"]):
        decode = [np.asarray(adapter.embed(ids[:, t : t + 1], t)) for t in range(gpt2.N_CTX - 24, gpt2.N_CTX)]
        out["h_decode"] = np.concatenate(decode, axis=1)
    if caps.claims(NEEDS["logits"]):
        out["logits"] = np.asarray(adapter.logits(x["h"]))
    return out


def max_abs_diff(reference: dict, other: dict) -> dict[str, float]:
    """Per case `other` has (an unclaimed case is absent)."""
    out = {}
    for case in [c for c in CASES if c in other]:
        a, b = reference[case].astype(np.float64), other[case].astype(np.float64)
        out[case] = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("nan")
    return out


def table(diffs: dict[str, dict[str, float] | str]) -> str:
    """Markdown: backend x case, max |diff| from the NumPy reference."""
    lines = ["| Backend | " + " | ".join(f"max abs diff {c}" for c in CASES) + " |", "|---|" + "---|" * len(CASES)]
    for name, row in diffs.items():
        cells = (
            [row] * len(CASES)
            if isinstance(row, str)
            else [f"{row[c]:.3g}" if c in row else f"not claimed ({NEEDS[c]})" for c in CASES]
        )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- fingerprints: parity across runs on different machines ------------------------------
# A run cannot ship its outputs (h_prefill alone is 6 MiB), so it ships a fingerprint: the
# sha256 of each output's float32 bytes (bit-identity between two runs is then a digest
# comparison: h is a gather plus one IEEE addition, so CPU and GPU must agree exactly), the
# full-array max |diff| from the NumPy reference computed in the same child process, and the
# values at a fixed sample of positions, so `merge` can give max |diff| between any two runs
# on those positions (for logits, summation order may differ between devices).
FINGERPRINT_FORMAT = "gpt2-conformance-parity/1"
REFERENCE = "numpy"  # registry.NUMPY_REFERENCE (the fingerprint format names it)
NOT_COMPUTED = "not computed: "  # how a run's missing fingerprint ({"error": ...}) starts
SAMPLE_SIZE = {"h_prefill": 64, "h_decode": 64, "logits": 256}
SAMPLE_SEED = 1024


def not_computed(why: str) -> dict:
    """A run's fingerprint when there is none: {"error": "not computed: <why>"}, which the
    parity table shows as said, not as a failure."""
    return {"error": NOT_COMPUTED + why}


def sha256(array: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float32).tobytes()).hexdigest()


def sample_indices(case: str, size: int) -> list[int]:
    """Flat positions sampled from an output with `size` elements: fixed by the case name, the
    same in every run, so two runs' samples line up."""
    rng = np.random.default_rng([SAMPLE_SEED, CASES.index(case)])
    return sorted(int(i) for i in rng.choice(size, min(SAMPLE_SIZE[case], size), replace=False))


def inputs_digest() -> str:
    """sha256 over the ids, the tables and the head's input: two fingerprints are comparable
    only when this agrees."""
    import hashlib

    from gpt2_conformance.runtime.tables import random_tables

    digest = hashlib.sha256()
    x = inputs()
    for array in (x["ids"].astype(np.int64), x["h"], *random_tables(gpt2.N_EMBD_SMALL)):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def fingerprint(out: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> dict:
    """What a run's JSON carries (SuiteResult.parity) for `merge` to compare runs with."""
    diffs = max_abs_diff(reference, out)
    cases = {}
    for case in [c for c in CASES if c in out]:
        array = np.asarray(out[case])
        flat = array.reshape(-1)
        index = sample_indices(case, flat.size)
        cases[case] = {
            "shape": list(array.shape),
            "dtype": str(array.dtype),
            "sha256": sha256(array),
            "reference_sha256": sha256(reference[case]),
            "max_abs_diff": None if np.isnan(diffs[case]) else diffs[case],  # None: shapes differ
            "sample_index": index,
            "sample": [float(flat[i]) for i in index],
        }
    return {
        "format": FINGERPRINT_FORMAT,
        "inputs_sha256": inputs_digest(),
        "reference": REFERENCE,
        "inputs": "seeded float32 tables at d=768; h_prefill: 2 x 1024 ids from past_length 0; h_decode: the "
        "cached decode of positions 1000..1023; logits: the tied head of 2 x 4 unit-scale vectors",
        "cases": cases,
        "not_claimed": {c: NEEDS[c] for c in CASES if c not in out},
    }


def fingerprint_of(factory, device: str = "cpu") -> dict:
    """The fingerprint of `factory`'s outputs against the NumPy reference's on the same inputs,
    both computed in this process (the suite's child, which has the framework imported)."""
    from gpt2_conformance import registry

    return fingerprint(outputs(factory, device), outputs(registry.resolve(REFERENCE)))


def table_from_fingerprints(fingerprints: dict[str, dict]) -> str:
    """The console parity table of `run --backend all`, from each run's fingerprint (no
    second pass through the backends)."""
    diffs = {}
    for name, fp in fingerprints.items():
        error = fp.get("error", "")
        diffs[name] = (
            (error if error.startswith(NOT_COMPUTED) else f"failed: {error}")
            if "error" in fp
            else {c: float("nan") if v["max_abs_diff"] is None else v["max_abs_diff"] for c, v in fp["cases"].items()}
        )
    return table(diffs)
