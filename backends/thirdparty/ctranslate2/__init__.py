"""Third-party backend: CTranslate2 (OpenNMT's C++ inference engine, PyPI wheel `ctranslate2`)
running a GPT-2 decoder written with its own model specification (its GPT-2 converter's spec, one
zero block, no final norm; no hub). See adapter.py, model.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="ctranslate2",
    adapter="adapter:CTranslate2Adapter",
    requires=("ctranslate2",),
    kind=JUDGED,
    wraps=(
        "CTranslate2 running a GPT-2 decoder written with its own model spec (one zero block, no final "
        "norm); h = `Generator.forward_batch` with an identity head, after a cache each step's head "
        "output of `generate_batch` after a cached static prompt; its output projection (wte) fed h_final"
        " as a model's token rows"
    ),
    extra="ctranslate2",
    waivers="waivers.toml",
    bench="bench",
)
