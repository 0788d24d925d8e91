"""Third-party backend: llama.cpp (through llama-cpp-python's C API bindings) running a GPT-2
GGUF that the adapter writes with the gguf package's GGUFWriter (llama.cpp's tensor names, a
synthetic vocabulary: no hub). h is read inside llama.cpp's own graph by its eval callback. See
adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="llama-cpp",
    adapter="adapter:LlamaCppAdapter",
    requires=("llama_cpp", "gguf"),
    kind=JUDGED,
    wraps=(
        "llama.cpp through llama-cpp-python's C API, running a GPT-2 GGUF the adapter writes with gguf's "
        "GGUFWriter; h read inside its graph by the eval callback, its tied head fed h_final through it"
    ),
    extra="llama-cpp",
    waivers="waivers.toml",
    bench="bench",
)
