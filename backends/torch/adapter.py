"""PyTorch adapter: numpy in and out around backends/torch/model.py's GPT2Embedding.

Eager mode (no torch.compile: compiling a gather plus an add buys nothing and changes the
exception a bad index raises). Inference runs under torch.no_grad(); gradients come from
torch.autograd. float16 and bfloat16 parameters are stored in that dtype; numpy has no
bfloat16, so bfloat16 results come back as float32 arrays holding bfloat16 values.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.torch.model import GPT2Embedding

_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_TORCH_DEVICES = {"cpu": "cpu", "gpu": "cuda"}


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """A zero-copy view of `array`, strides kept. torch warns on read-only arrays (the suite's
    tables are read-only) because it cannot mark the view read-only; every use here only reads
    it. torch has no negative strides, so a reversed view is copied first (same values)."""
    if any(stride < 0 for stride in array.strides):
        array = array.copy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def _to_numpy(t: torch.Tensor, copy: bool) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)  # exact; a new tensor, so no further copy is needed
        copy = False
    return t.detach().to("cpu", copy=copy).numpy()


class TorchAdapter(Adapter):
    capabilities = Capabilities(dtypes=tuple(_TORCH_DTYPES), devices=("cpu", "gpu"), gradients=True)
    model_class = GPT2Embedding  # a subclass (say, one with more layers) plugs in here

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.dtype = self.framework_dtype(_TORCH_DTYPES)
        self.device = torch.device(_TORCH_DEVICES[config.device])
        # skip_init: the tables stay uninitialised until load_tables or init_tables, which
        # always come next; drawing or zeroing 39M values per adapter would be wasted, and the
        # suite builds many. (Its first call imports torch's meta-device support, once per
        # process.)
        self.model = nn.utils.skip_init(self.model_class, config.n_embd, device=self.device, dtype=self.dtype)
        self.model.eval()

    @classmethod
    def device_available(cls, device):
        if device == "cpu":
            return True, ""
        if device == "gpu" and torch.cuda.is_available():
            return True, ""
        return False, "torch sees no GPU on this machine (torch.cuda.is_available() is False)"

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        # copy_ into the existing parameters: one copy, rounding to nearest even and
        # moving to the device in the same step
        self.model.load_state_dict({"wte.weight": from_numpy(wte), "wpe.weight": from_numpy(wpe)})

    def tables(self):
        return _to_numpy(self.model.wte.weight, copy=True), _to_numpy(self.model.wpe.weight, copy=True)

    def init_tables(self, seed):
        self.model.reset_parameters(torch.Generator(self.device).manual_seed(seed))

    @torch.no_grad()
    def assign_wte_row(self, index, values):
        self.model.wte.weight[index] = from_numpy(np.asarray(values, np.float32)).to(self.device)

    def parameters(self):
        # named_parameters lists a shared Parameter once, so a tied head adds nothing here
        return {name: tuple(p.shape) for name, p in self.model.named_parameters()}

    # -- forward ------------------------------------------------------------------
    def _ids(self, ids) -> torch.Tensor:
        if not isinstance(ids, np.ndarray):
            raise TypeError(f"ids must be a numpy array, got {type(ids).__name__}")
        if ids.dtype.kind in "iu" and ids.dtype not in (np.int32, np.int64):
            # nn.Embedding takes int32/int64 indices only; "safe" refuses uint64 (which
            # could wrap) instead of mangling it
            ids = ids.astype(np.int64, casting="safe")
        # negative strides (ids[:, ::-1]) are not expressible in torch; copy only then
        return from_numpy(np.ascontiguousarray(ids)).to(self.device)

    @torch.no_grad()
    def embed(self, ids, past_length=0):
        return _to_numpy(self.model(self._ids(ids), past_length), copy=False)

    @torch.no_grad()
    def logits(self, h_final):
        h_final = np.asarray(h_final)
        if h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd:
            raise ValueError(f"h_final.shape={h_final.shape}, but should be (B, T, {self.config.n_embd})")
        h = from_numpy(np.ascontiguousarray(h_final)).to(self.device)
        return _to_numpy(self.model.head(h), copy=False)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        ids = self._ids(ids)
        cot_h = from_numpy(np.ascontiguousarray(cotangent_h)).to(self.device, self.dtype)
        cot_logits = from_numpy(np.ascontiguousarray(cotangent_logits)).to(self.device, self.dtype)
        params = [self.model.wte.weight, self.model.wpe.weight]
        with torch.enable_grad():
            h = self.model(ids, past_length)
            logits = self.model.head(h)
            # the vector-Jacobian product with these cotangents is exactly the gradient of
            # L = sum(cot_h * h) + sum(cot_logits * logits), without forming L
            d_wte, d_wpe = torch.autograd.grad([h, logits], params, grad_outputs=[cot_h, cot_logits])
        return tuple(d.detach().to("cpu", torch.float32).numpy() for d in (d_wte, d_wpe))
