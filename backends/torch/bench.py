"""Bench hooks for the PyTorch backend (same names in every backends/<fw>/bench.py).

Modes:
  suite    what TorchAdapter runs: GPT2Embedding.forward in eager mode under no_grad, with its
           check (torch.aminmax on the ids' device and one host sync for the verdict).
  suite-1thread  the suite mode on one intra-op thread (torch.set_num_threads(1)).
  compile  the same checks, eager and before the kernel (check_* from model.py), then
           torch.compile(F.embedding(ids, wte) + wpe[p:p+T]); the head is torch.compile(head).
           The check cannot live inside the compiled graph without a graph break (it raises
           on a host bool), and torch.compile changes the exception type a bad index raises,
           which is why the adapter stays eager.
  nocheck  forward only: the compile mode's kernel with no check before it (F.embedding then
           raises or asserts only where torch's own gather does): what the check costs.
           Comparison only.
backward: suite = torch.autograd.grad(h, [wte, wpe], dh) on a graph built once (retain_graph);
compile = torch.compile of the same dense scatter-add (index_add_ into zeros, wpe rows summed
over the batch).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.backends.torch import BACKEND

MODES, CHECK = BACKEND.mode_table()  # declared once, in the registry entry (__init__.py)
SUITE_MODE = "suite"
FASTEST_MODE = "compile"
_THREADS = torch.get_num_threads()  # the default, restored for every mode but suite-1thread


def available(device: str) -> tuple[bool, str]:
    from gpt2_conformance.backends.torch.adapter import TorchAdapter

    return TorchAdapter.device_available(device)


def threads_setting() -> str:
    return f"torch.get_num_threads()={torch.get_num_threads()}"


@torch.compile(dynamic=False)
def _gather_add(wte, wpe_rows, ids):
    return F.embedding(ids, wte) + wpe_rows


@torch.compile(dynamic=False)
def _scatter_add(dh, ids, past_length: int, n_vocab: int, n_ctx: int):
    d = dh.shape[-1]
    d_wte = torch.zeros(n_vocab, d, dtype=dh.dtype, device=dh.device).index_add_(0, ids.reshape(-1), dh.reshape(-1, d))
    d_wpe = torch.zeros(n_ctx, d, dtype=dh.dtype, device=dh.device)
    d_wpe[past_length : past_length + dh.shape[1]] = dh.sum(0)
    return d_wte, d_wpe


class Runner:
    def __init__(self, wte, wpe, mode: str, device: str):
        from gpt2_conformance.backends.torch.adapter import TorchAdapter

        self.mode = mode
        # intra-op threads are process-wide: set them for this mode (torch's 2-thread kernels
        # lose most of their speed when another process holds one of the two cores)
        torch.set_num_threads(1 if mode == "suite-1thread" else _THREADS)
        self.adapter = TorchAdapter(AdapterConfig(n_embd=wte.shape[1], device=device))
        self.adapter.load_tables(wte, wpe)
        self.model = self.adapter.model
        self.device = self.adapter.device
        self._head = torch.compile(self.model.head, dynamic=False) if mode == "compile" else self.model.head

    def put(self, array):
        return torch.from_numpy(array).to(self.device)

    def sync(self, out):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    def _checked_compiled_forward(self, ids, past_length):
        from gpt2_conformance.backends.torch import model as m

        m.check_ids_layout(tuple(ids.shape), str(ids.dtype).removeprefix("torch."), True)
        past_length = m.check_past_length(past_length)
        m.check_positions(ids.shape[1], past_length, self.model.n_ctx)
        m.check_token_ids(ids, self.model.n_vocab)
        return _gather_add(self.model.wte.weight, self.model.wpe.weight[past_length : past_length + ids.shape[1]], ids)

    def make(self, w, ids, past_length, dh=None, h=None):
        model = self.model
        if w.kind == "forward" and self.mode == "nocheck":
            wte, wpe = model.wte.weight, model.wpe.weight[past_length : past_length + ids.shape[1]]

            @torch.no_grad()
            def unchecked():
                return _gather_add(wte, wpe, ids)

            return unchecked
        if w.kind == "forward":
            fwd = self._checked_compiled_forward if self.mode == "compile" else model

            @torch.no_grad()
            def forward():
                return fwd(ids, past_length)

            return forward
        if w.kind == "backward":
            if self.mode != "compile":
                with torch.enable_grad():
                    out = model(ids, past_length)
                params = [model.wte.weight, model.wpe.weight]
                return lambda: torch.autograd.grad(out, params, dh, retain_graph=True)
            return lambda: _scatter_add(dh, ids, past_length, gpt2.N_VOCAB, gpt2.N_CTX)
        if w.kind == "logits":

            @torch.no_grad()
            def logits():
                return self._head(h)

            return logits
        return None


def native_bench(adapter, device: str):
    """The public native path (conformance/api/bench.py) for the torch reference: the same
    calls as the suite mode, reached as any implementation's hooks are. tests/bench/test_native_hooks.py
    shows it dispatches the same ATen calls as Runner("suite"): the path adds nothing."""
    from gpt2_conformance.api.bench import NativeBench

    model, dev = adapter.model, adapter.device

    def sync(out):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return out

    @torch.no_grad()
    def forward(ids, past_length):
        return model(ids, past_length)

    @torch.no_grad()
    def logits(h):
        return model.head(h)

    return NativeBench(
        put=lambda a: torch.from_numpy(a).to(dev),
        forward=forward,
        logits=logits,
        sync=sync,
        description=MODES["suite"],
        threads=threads_setting(),
    )
