"""What tests/backends/test_keras_hub_*.py ask of each keras-hub entry, in a process of its own
(Keras picks its backend once per process, from KERAS_BACKEND, which each entry's adapter sets)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import numpy as np
from gpt2_conformance.backends.thirdparty.keras_hub import adapter
a = getattr(adapter, {cls!r})()  # imports keras on the entry's backend
import keras
rng = np.random.default_rng(0)
wte = rng.standard_normal((50257, 768), dtype=np.float32)
wpe = rng.standard_normal((1024, 768), dtype=np.float32)
a.load_tables(wte, wpe)
ids = np.array([[1, 50256, 7]])
h = a.embed(ids, 0)
print(keras.backend.backend(), all(np.array_equal(x, y) for x, y in zip(a.tables(), (wte, wpe))),
      np.array_equal(h, wte[ids] + wpe[:3]))
"""


def probe(cls: str, env: dict | None = None) -> list[str]:
    """[Keras' backend, tables read back bit for bit, h == wte[X] + wpe[t] bit for bit] for the
    adapter class `cls` of backends/thirdparty/keras_hub/adapter.py, in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(cls=cls)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, **(env or {})),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()
