"""Cross-backend parity: the same inputs through every backend, compared with the NumPy
reference. Each backend runs in its own child process (`python -m conformance.parity NAME OUT`)
so that one framework's crash cannot take the others down.

Inputs: the suite's tables (seeded), a prefill of 1024 tokens from past_length 0, the cached
decode of the last 24 positions, and the tied logits of 8 unit-scale h vectors. Expected: the
float32 embedding agrees bit for bit (max |diff| exactly 0); logits differ only by summation order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np

from conformance import gpt2
from conformance.adapter import AdapterConfig

CASES = ("h_prefill", "h_decode", "logits")


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2019)
    ids = rng.integers(0, gpt2.N_VOCAB, (2, gpt2.N_CTX))
    ids[0, :3] = [0, gpt2.N_VOCAB - 1, 32768]
    h = rng.standard_normal((2, 4, gpt2.N_EMBD_SMALL), dtype=np.float32)
    return {"ids": ids, "h": h}


def outputs(factory, device: str = "cpu") -> dict[str, np.ndarray]:
    from conformance.plugin import random_tables

    adapter = factory(AdapterConfig(device=device))
    adapter.load_tables(*random_tables(gpt2.N_EMBD_SMALL))
    x = inputs()
    ids = x["ids"]
    decode = [np.asarray(adapter.embed(ids[:, t : t + 1], t)) for t in range(gpt2.N_CTX - 24, gpt2.N_CTX)]
    return {"h_prefill": np.asarray(adapter.embed(ids, 0)), "h_decode": np.concatenate(decode, axis=1),
            "logits": np.asarray(adapter.logits(x["h"]))}


def run_child(name: str, device: str = "cpu", timeout: float = 600) -> tuple[dict[str, np.ndarray] | None, str]:
    """(outputs, "") from a child process, or (None, why it failed)."""
    with tempfile.TemporaryDirectory(prefix="gpt2c-parity-") as tmp:
        path = os.path.join(tmp, "out.npz")
        try:
            child = subprocess.run([sys.executable, "-m", "conformance.parity", name, path, device],
                                   capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout:.0f} s"
        if child.returncode != 0:
            tail = (child.stderr.strip().splitlines() or ["(no output)"])[-1]
            return None, f"exit code {child.returncode}: {tail}"
        with np.load(path) as data:
            return {k: data[k] for k in data.files}, ""


def max_abs_diff(reference: dict, other: dict) -> dict[str, float]:
    out = {}
    for case in CASES:
        a, b = reference[case].astype(np.float64), other[case].astype(np.float64)
        out[case] = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("nan")
    return out


def table(diffs: dict[str, dict[str, float] | str]) -> str:
    """Markdown: backend x case, max |diff| from the NumPy reference."""
    lines = ["| Backend | " + " | ".join(f"max abs diff {c}" for c in CASES) + " |", "|---|" + "---|" * len(CASES)]
    for name, row in diffs.items():
        cells = [row] * len(CASES) if isinstance(row, str) else [f"{row[c]:.3g}" for c in CASES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    from conformance import registry

    name, path = sys.argv[1], sys.argv[2]
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    np.savez(path, **outputs(registry.resolve(name), device))
