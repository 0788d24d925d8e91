"""Native bench hooks shared by the torch black-box adapters (hf_transformers, transformer_lens;
conformance/api/bench.py): torch tensors put on the device once, torch's own sync, the
model's own forward and head, no numpy inside a timed call.

On a GPU the adapter (which claims the CPU only) is built on the CPU as usual and its model
is then moved to CUDA here, if torch sees one; nothing else changes.
"""

from __future__ import annotations

import torch

from gpt2_conformance.api.bench import NativeBench


def available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    if device == "gpu" and torch.cuda.is_available():
        return True, ""
    return False, f"torch {torch.__version__} sees no GPU on this machine"


def target(adapter, device: str) -> torch.device:
    """Moves the adapter's model to the timed device; the torch.device."""
    if device == "gpu":
        adapter.model.to("cuda")
        return torch.device("cuda")
    return torch.device("cpu")


def native(adapter, device: str, forward, description: str) -> NativeBench:
    """NativeBench around forward(ids, past_length) -> h and the adapter's own head."""
    dev = target(adapter, device)

    def sync(out):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return out

    @torch.no_grad()
    def logits(h):
        return adapter._head(h)

    return NativeBench(
        put=lambda a: torch.from_numpy(a).to(dev),
        forward=torch.no_grad()(forward),
        logits=logits,
        sync=sync,
        description=description,
        threads=f"torch.get_num_threads()={torch.get_num_threads()}",
    )
