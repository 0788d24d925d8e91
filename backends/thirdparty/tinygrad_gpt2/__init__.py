"""Third-party backend: a GPT-2 token + position embedding and tied head on tinygrad, written by us
as tinygrad's examples/gpt2.py writes it (tinygrad packages no GPT-2), run on tinygrad's CPU device.
See model.py, adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

BACKEND = Backend(
    name="tinygrad-gpt2",
    adapter="adapter:TinygradGPT2Adapter",
    requires=("tinygrad",),
    kind=JUDGED,
    wraps="ours, written as tinygrad's `examples/gpt2.py` (`nn.Embedding` wte/wpe, tied `lm_head`), on tinygrad's "
    "kernels (CPU device, clang or zig's clang); h is the example's `wte(tokens) + wpe(pos)` read with `.numpy()`, "
    "logits its `lm_head(h)`",
    extra="tinygrad",
    waivers="waivers.toml",
    # tinygrad's sqlite cache of compiled kernels, kept between the suite's processes and runs
    child_env={"CACHEDB": CACHE + "/cache.db"},
)
