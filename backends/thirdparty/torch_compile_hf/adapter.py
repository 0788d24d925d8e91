"""Adapter for Hugging Face transformers' GPT2LMHeadModel compiled by torch.compile: the model
hf-transformers judges eager (backends/thirdparty/hf_transformers), here as TorchDynamo traces it
and Inductor compiles it to C++ CPU kernels. What is judged is the compiled code: Inductor
lowers aten.embedding itself (its own gather and bounds checks), so its answers to bad
indices, and its rounding, are Inductor's, not eager torch's.

What is observed, and how (Capabilities.black_box):

- h: `GPT2Model.forward(..., output_hidden_states=True).hidden_states[0]`, the input of block 0,
  returned by the compiled function as a graph output (the whole one-block forward is compiled:
  hf-transformers' early stop, an exception raised in a hook, cannot be traced).
- the cache offset: the same real DynamicCache of past_length (zero, stride-0) entries as
  hf-transformers, passed into the compiled function; GPT2Model derives the positions from
  `cache.get_seq_length()`, traced as a symbolic size.
- logits: the tied `lm_head(h)`, compiled as a function of its own.
- gradients: not claimed. Autograd through the compiled forward (AOTAutograd's compiled backward)
  returned NaN in five rows of dwte in two of three full runs on two threads (the past_length 5
  cases, a different one each time; never when the case ran alone, nor in a standalone script).
  An intermittent failure cannot be waived (the waiver is stale on every run where it passes) and
  would make the verdict a coin toss, so TIED-GRAD is NOT CLAIMED, with this reason, until it is
  understood: an open finding (docs/backends.md), not a pass.
- init and parameters(): hf-transformers' (the model is built the same way).

Inductor's own bounds checks are `TORCH_CHECK`s inside its generated C++ kernels, and their
messages name the kernel's source file under Inductor's cache folder ("kernel,
/tmp/torchinductor_root/ek/cek3....main.cpp:26, index out of bounds: ..."). The adapter raises
the same exception class with that folder written as `<inductor cache>`, the text otherwise as
it is, so that no report carries a machine-local path; it adds no check of its own.

The compilation is `torch.compile(fn, backend="inductor", fullgraph=True, dynamic=True)`:
fullgraph, so a graph break raises instead of running part of the model eagerly; dynamic, so
the suite's many shapes reuse one graph; and a recompile past the limit raises
(torch._dynamo.config.fail_on_recompile_limit_hit) instead of silently falling back to eager
torch, which would judge hf-transformers again under this name.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch._dynamo
from torch._inductor.runtime.cache_dir_utils import cache_dir
from transformers.utils.output_capturing import maybe_install_capturing_hooks

from gpt2_conformance.api.adapter import AdapterConfig, Capabilities
from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import HFTransformersAdapter
from gpt2_conformance.backends.thirdparty.torch_blackbox import TORCH_DTYPES, from_numpy

# The suite meets each graph in a few variants (batch and length 1 are specialised, a cache or none,
# three dtypes, with and without grad): room for them all, and past that an error, never eager torch
torch._dynamo.config.recompile_limit = 64
torch._dynamo.config.accumulated_recompile_limit = 1024
torch._dynamo.config.fail_on_recompile_limit_hit = True


def _forward(transformer, input_ids, cache):
    """h: GPT2Model's hidden_states[0], as a graph output (compiled once for every adapter: the
    model is an argument, not a closure, so a new adapter's model is a new input, not new code)."""
    out = transformer(input_ids=input_ids, cache=cache, use_cache=cache is not None, output_hidden_states=True)
    return out.hidden_states[0]


def _head(head, h):
    return head(h)


_compiled_forward = torch.compile(_forward, backend="inductor", fullgraph=True, dynamic=True)
_compiled_head = torch.compile(_head, backend="inductor", fullgraph=True, dynamic=True)


class TorchCompileHFAdapter(HFTransformersAdapter):
    capabilities = Capabilities(
        dtypes=tuple(TORCH_DTYPES),
        devices=("cpu",),
        gradients=False,  # the module docstring says why: an intermittent NaN in the compiled backward
        black_box="h = hidden_states[0] of GPT2Model compiled by torch.compile (Inductor, fullgraph, "
        "dynamic shapes), a graph output; offset from a DynamicCache holding past_length entries; "
        "logits = compiled lm_head(h)",
    )
    FULL_FORWARD = True

    @classmethod
    def implementation(cls) -> str:
        import transformers

        return (
            f"transformers {transformers.__version__} GPT2LMHeadModel compiled by torch.compile "
            f"(inductor, CPU) of torch {torch.__version__}"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        # Inductor writes a kernel's loops as an OpenMP parallel region only when torch runs more
        # than one thread; its bounds checks (TORCH_CHECK) behave differently inside one
        # (waivers.toml). The suite gives each of its processes a share of the cores
        # (OMP_NUM_THREADS=1 with two shards on two cores), which would judge serial kernels that a
        # deployment on a multi-core CPU never runs: at least two threads, on every machine, so the
        # verdicts do not depend on the run's --jobs. Set here, where every compile and every call
        # follows, and again for each adapter (the bench's one-thread modes set one thread between
        # them), never at import: torch starts its pthreadpool's thread in this call, and a suite
        # child that is still one thread after importing this module forks its test workers
        # (run/forking.py) instead of paying a new process, import and compilation per crash.
        torch.set_num_threads(max(2, torch.get_num_threads()))
        super().__init__(config)

    def _set_model(self, model) -> None:
        self.model = model.to(self.dtype).eval()
        # transformers installs its output-capturing hooks on the first forward, under a threading
        # lock that Dynamo cannot trace: install them here, eagerly, as that first call would
        maybe_install_capturing_hooks(self.model.transformer)

    def _head(self, h):
        with _kernel_paths_hidden():
            return _compiled_head(self.model.lm_head, h)

    def _h(self, ids, past_length) -> torch.Tensor:
        input_ids = from_numpy(ids) if isinstance(ids, np.ndarray) else ids
        cache = self._cache(input_ids.shape[0], past_length) if past_length else None
        with _kernel_paths_hidden():
            return _compiled_forward(self.model.transformer, input_ids, cache)


@contextlib.contextmanager
def _kernel_paths_hidden():
    """A RuntimeError whose message names a file under Inductor's cache folder is raised again, the
    same class, with the folder written as `<inductor cache>` (the module docstring)."""
    try:
        yield
    except RuntimeError as exc:
        folder = cache_dir()
        if type(exc) is not RuntimeError or folder not in str(exc):
            raise
        raise RuntimeError(str(exc).replace(folder, "<inductor cache>")) from exc
