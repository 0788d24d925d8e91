"""The file route: a verdict on a GPT-2 someone exported to a file, with no adapter to write.

    onnx_file.py   an ONNX file (torch.onnx.export, optimum, ...) run by ONNX Runtime, OpenVINO or tract
    gguf_file.py   a GPT-2 GGUF (llama.cpp's convert_hf_to_gguf.py) run by llama.cpp

Each module finds in the file what the suite needs (the two tables, h, the head, how positions
enter), says what it found, and builds an adapter class whose claims are what the file can be
asked: `kv_cache` only where the file can be fed a cache, `tied_head` only where it has a head.
The engines are the built-in backends' own (onnx_hf_common's engine adapters, LlamaCppAdapter):
the file route gives them the user's graph instead of the suite's export. load_tables writes a
copy of the file with the tables replaced, so every clause that needs the suite's tables runs.

How the file reaches the suite's processes: `gpt2-conformance run --onnx FILE` (conformance/
run/files.py) puts the path in the environment (FILE_VARIABLE, and ENGINE_VARIABLE for ONNX),
and names the adapter `gpt2_conformance.backends.files.onnx_file:FileAdapter` (or gguf_file's);
each module builds FileAdapter from the environment on first use (a module __getattr__), in the
command's process (which refuses a file it cannot understand: exit 2) and in every child.

Not a registered backend (it is not in backends/__init__.py FOLDERS): it has no file of its own
to judge until a user names one.
"""

FILE_VARIABLE = "GPT2C_FILE"  # the file's path (conformance/run/files.py sets it)
ENGINE_VARIABLE = "GPT2C_FILE_ENGINE"  # onnx: onnxruntime (default), openvino or tract


class FileError(ValueError):
    """A file the suite cannot judge: the file and what is missing, in one line."""

    def __init__(self, path: str, what: str):
        self.path = path
        super().__init__(f"{path}: {what}")
