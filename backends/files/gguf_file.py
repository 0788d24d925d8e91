"""A GPT-2 GGUF file, judged as llama.cpp runs it: `gpt2-conformance run --gguf FILE`.

What the suite looks for (analyse(); every miss is a FileError naming it), by llama.cpp's names
for a GPT-2 (gguf-py constants.py MODEL_TENSORS[MODEL_ARCH.GPT2], as convert_hf_to_gguf.py writes
them; conformance/golden/gguf_reader.py cites the lines):

- general.architecture "gpt2" (llama.cpp builds another graph for any other architecture);
- the tables token_embd.weight [50257, d] and position_embd.weight [1024, d], of a type llama.cpp
  reads rows of (F32, F16, BF16, Q8_0, ...);
- the head: output.weight where the file has one (llama.cpp's head then reads it: an untied
  head), else token_embd.weight itself (src/models/gpt2.cpp: "if output is NULL, init from the
  input tok embed"): tied.

The engine is the llama-cpp backend's adapter (LlamaCppAdapter): h is the tensor llama.cpp names
"inpL", read by the eval callback; the head is llama.cpp's own with its input ("result_norm")
replaced; positions are llama.cpp's own cache (kv_cache is claimed: llama.cpp always has one).
load_tables writes a copy of the file (write_copy) with the two tables replaced and every other
key and tensor as the file has them, through the gguf library's GGUFReader and GGUFWriter as
gguf-py's gguf_new_metadata.py copies a file. The tables go in as F32 whatever their type in the
file: the float32 clauses compare h with the suite's float32 tables bit for bit, and llama.cpp
computes inpL in float32 from rows of any type (get_rows), so only the rounding of the stored
table differs; the file's own F16/quantised tables are what the checkpoint route reads
(`--checkpoint FILE`: GOLDEN on the file's own values).
"""

from __future__ import annotations

import os

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import DTYPES, Capabilities
from gpt2_conformance.backends.files import FILE_VARIABLE, FileError

TOKEN_EMBD, POSITION_EMBD, OUTPUT = "token_embd.weight", "position_embd.weight", "output.weight"


class Found:
    """What analyse() found in the file."""

    def __init__(self, path: str, n_embd: int, types: dict[str, str], untied: bool, n_tensors: int):
        self.path, self.n_embd, self.types, self.untied, self.n_tensors = path, n_embd, types, untied, n_tensors

    def describe(self) -> str:
        head = (
            f"head {OUTPUT} ({self.types[OUTPUT]}): NOT token_embd, untied"
            if self.untied
            else f"no {OUTPUT}: llama.cpp's head reads {TOKEN_EMBD} (tied)"
        )
        return (
            f"architecture gpt2, {TOKEN_EMBD} [{gpt2.N_VOCAB}, {self.n_embd}] {self.types[TOKEN_EMBD]} and "
            f"{POSITION_EMBD} [{gpt2.N_CTX}, {self.n_embd}] {self.types[POSITION_EMBD]} ({self.n_tensors} tensors); "
            f"{head}; h = llama.cpp's inpL; positions from llama.cpp's KV cache; the copies the suite loads hold "
            "its tables as F32"
        )

    def not_claimed_why(self) -> dict[str, str]:
        why = {
            "init": "a file holds tables, not an initialiser",
            "gradients": "llama.cpp runs inference only",
            "mutable_tables": "llama.cpp maps the file's tables: no in-place write reaches them",
        }
        for dtype in DTYPES:
            if dtype != "float32":
                why[f"dtype:{dtype}"] = "llama.cpp computes h in float32 whatever the table type"
        for size in gpt2.SIZES.values():
            if size != self.n_embd:
                why[f"size:{size}"] = f"the file is d = {self.n_embd}"
        return why


def _reader(path: str):
    if not os.path.exists(path):
        raise FileError(path, "no such file")
    if not os.path.isfile(path):
        raise FileError(path, "not a file")
    import gguf

    try:
        return gguf.GGUFReader(path)
    except Exception as exc:  # noqa: BLE001 - bad magic, a truncated header, ...
        raise FileError(path, f"not a GGUF file ({type(exc).__name__}: {str(exc)[:200]})") from None


def analyse(path: str) -> Found:
    reader = _reader(path)
    field = reader.get_field("general.architecture")
    try:
        arch = field.contents() if field is not None else None
    except Exception:  # noqa: BLE001 - a non-string value: reported as what it is not
        arch = "?"
    if arch != "gpt2":
        raise FileError(
            path,
            f"general.architecture is {arch!r}, not 'gpt2': llama.cpp builds another graph for it, "
            "and the file route judges GPT-2 GGUFs",
        )
    tensors = {t.name: t for t in reader.tensors}
    shapes = {name: tuple(int(n) for n in reversed(t.shape.tolist())) for name, t in tensors.items()}
    for name, rows in ((TOKEN_EMBD, gpt2.N_VOCAB), (POSITION_EMBD, gpt2.N_CTX)):
        if name not in tensors:
            raise FileError(path, f"no {name} tensor (llama.cpp's GPT-2 {'wte' if rows == gpt2.N_VOCAB else 'wpe'})")
        if len(shapes[name]) != 2 or shapes[name][0] != rows:
            raise FileError(path, f"{name} is {list(shapes[name])}, not [{rows}, d]")
    n_embd = shapes[TOKEN_EMBD][1]
    if shapes[POSITION_EMBD][1] != n_embd:
        raise FileError(path, f"{TOKEN_EMBD} is [.., {n_embd}] but {POSITION_EMBD} is {list(shapes[POSITION_EMBD])}")
    types = {name: t.tensor_type.name for name, t in tensors.items() if name in (TOKEN_EMBD, POSITION_EMBD, OUTPUT)}
    return Found(path, n_embd, types, OUTPUT in tensors, len(tensors))


def write_copy(source: str, path: str, wte: np.ndarray, wpe: np.ndarray) -> None:
    """`source` copied to `path` with token_embd and position_embd replaced by (wte, wpe) as F32;
    every other key and tensor as `source` has it (gguf-py's gguf_new_metadata.py copy)."""
    import gguf

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(path, "gpt2", endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # GGUFWriter writes these itself
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
    replaced = {TOKEN_EMBD: np.ascontiguousarray(wte, np.float32), POSITION_EMBD: np.ascontiguousarray(wpe, np.float32)}
    data = []
    for tensor in reader.tensors:
        if tensor.name in replaced:
            array = replaced[tensor.name]
            writer.add_tensor_info(tensor.name, array.shape, array.dtype, array.nbytes, gguf.GGMLQuantizationType.F32)
        else:
            array = tensor.data
            writer.add_tensor_info(tensor.name, array.shape, array.dtype, array.nbytes, tensor.tensor_type)
        data.append(array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for array in data:
        writer.write_tensor_data(array, tensor_endianess=reader.endianess)
    writer.close()


def read_tables(path: str) -> tuple[np.ndarray, np.ndarray]:
    """token_embd and position_embd of the file as float32, dequantised by gguf.quants where stored
    in another type."""
    import gguf

    tensors = {t.name: t for t in _reader(path).tensors}
    out = []
    for name in (TOKEN_EMBD, POSITION_EMBD):
        tensor = tensors[name]
        values = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
        out.append(np.asarray(values, np.float32).reshape(tuple(int(n) for n in reversed(tensor.shape.tolist()))))
    return out[0], out[1]


def adapter_for(path: str) -> type:
    """An adapter class judging the GGUF at `path` on llama.cpp, its claims the file's."""
    path = os.path.abspath(path)
    found = analyse(path)
    try:
        from gpt2_conformance.backends.thirdparty.llama_cpp.adapter import LlamaCppAdapter
    except ImportError as exc:
        raise ImportError(
            f"--gguf needs {exc.name or exc}, which is not installed: pip install 'gpt2-conformance[llama-cpp]'"
        ) from None

    class GGUFFileAdapter(LlamaCppAdapter):
        FOUND = found
        WAIVERS = None  # a user's file has no waivers of ours: --waivers FILE gives them
        NOT_CLAIMED_WHY = found.not_claimed_why()
        capabilities = Capabilities(
            dtypes=("float32",),
            devices=("cpu",),
            sizes=(found.n_embd,),
            kv_cache=True,
            tied_head=True,
            init=False,
            gradients=False,
            mutable_tables=False,
            black_box=f"the GGUF file {path} run by llama.cpp: {found.describe()}",
        )

        @classmethod
        def implementation(cls) -> str:
            return f"{super().implementation()}; the file {path}"

        def write_model(self, path: str, wte: np.ndarray, wpe: np.ndarray) -> None:
            write_copy(found.path, path, wte, wpe)

        @classmethod
        def file_tables(cls) -> tuple[np.ndarray, np.ndarray]:
            """The file's own (wte, wpe) as float32 (dequantised by the gguf library)."""
            return read_tables(found.path)

        def parameters(self):
            """The file's tables and, where it has one, the untied head's own matrix."""
            out = {TOKEN_EMBD: (gpt2.N_VOCAB, found.n_embd), POSITION_EMBD: (gpt2.N_CTX, found.n_embd)}
            if found.untied:
                out[OUTPUT] = (gpt2.N_VOCAB, found.n_embd)
            return out

    return GGUFFileAdapter


def __getattr__(name: str):
    """FileAdapter: the adapter for the file the environment names (backends/files/__init__.py)."""
    if name != "FileAdapter":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    path = os.environ.get(FILE_VARIABLE)
    if not path:
        raise ValueError(f"{__name__}:FileAdapter needs the file in {FILE_VARIABLE} (gpt2-conformance run --gguf FILE)")
    made = adapter_for(path)
    globals()["FileAdapter"] = made
    return made
