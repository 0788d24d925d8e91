"""Adapter for llama.cpp, through llama-cpp-python's bindings of its C API (`llama_cpp`), running
a GPT-2 GGUF the adapter writes (gguf_model.py). Judged as it is: llama.cpp's graph, its batch
checks and its KV cache are the verdict.

What is observed, and how (Capabilities.black_box):

- the model: the GGUF written by gguf.GGUFWriter with llama.cpp's GPT-2 tensor names, loaded by
  llama_model_load_from_file; one context per load with llama.cpp's own defaults except: the
  context is the model's trained one (n_ctx 0 = n_ctx_train = 1024, as llama-server's `-c 0`),
  one batch takes the whole context (n_batch = n_ubatch = 1024, so a call is one graph), the
  threads are this process's share of the cores (machine.threads()), and an eval callback is set.
- h: the tensor llama.cpp names "inpL" in its GPT-2 graph (src/models/gpt2.cpp:
  `inpL = ggml_add(ctx0, inpL, pos); cb(inpL, "inpL", -1)`), i.e. get_rows(token_embd) +
  get_rows(position_embd, inp_pos), read by the context's eval callback (cb_eval: llama.cpp's
  scheduler hands the callback each named tensor once computed; ggml_backend_tensor_get copies
  it out). Nothing is recomputed outside llama.cpp. Once h is read the callback returns false,
  which ends the evaluation of the graph there (ggml_backend_sched_compute_splits breaks out of
  its node loop; llama_decode still returns 0 and its cache keeps the positions, which llama.cpp
  assigns before computing): the block, ln_f and the head after h cannot change h, and would
  cost most of each call. STOP_AFTER_H = False evaluates the whole graph (tests/backends/test_llama_cpp.py
  checks both give the same bits).
- the offset: llama.cpp's own. Each row of ids is one sequence: the memory (KV cache) is
  cleared, past_length tokens (id 0) are decoded first when past_length > 0, then the row is
  decoded with llama_batch_get_one, a batch without positions, so llama.cpp places it at
  seq_pos_max + 1 of its cache (src/llama-batch.cpp), as llama.cpp's own examples decode.
  past_length has no counterpart in llama.cpp's API (the offset is what the cache holds), so it
  becomes the length of that prefix, made by np.full: numpy refuses a negative or fractional
  length, as it does for the cache arrays of the ONNX and MLX adapters.
- ids: each row goes to llama.cpp as a list of Python ints (ndarray.tolist()) in a ctypes
  llama_token array, as llama-cpp-python's own calls pass tokens: ctypes refuses floats, and
  takes bools as 0 and 1 (bool is an int).
- errors: llama_decode returns a status; like llama-cpp-python's own LlamaContext.decode
  (llama_cpp/_internals.py), the adapter raises RuntimeError("llama_decode returned N"), with the
  lines llama.cpp logged during that call appended (llama_log_set). The adapter adds no check of
  its own, with one exception forced by the C API: llama_token is int32_t, so an id outside
  int32 cannot be handed to llama.cpp at all (ctypes would wrap it silently); the adapter
  raises OverflowError for it rather than pass another id.
- tables(): the arrays written into the GGUF; llama.cpp offers no read-back of a weight.

- logits: llama.cpp's own head, the graph's mul_mat of the tied token_embd (no output.weight)
  with its input, the tensor llama.cpp names "result_norm" (ln_f's output; gpt2.cpp:
  `cb(cur, "result_norm", -1)`, then `build_lora_mm(model.output, cur)`). No API feeds the head
  an h_final, so the eval callback writes h_final into "result_norm" once llama.cpp has computed
  it and before the head reads it (ggml_backend_tensor_set), for a batch of placeholder tokens
  (id 0 at positions 0..T-1, each an output) of one sequence per row; the logits are
  llama_get_logits, as any caller reads them. The head's kernel, its weights and its layout are
  llama.cpp's; only its input is replaced.

Not claimed: the implementation's init (llama.cpp loads weights, it has no initialiser),
gradients, in-place table updates, float16 and bfloat16 (the GGUF holds float32 tables;
llama.cpp computes inpL in float32 whatever the table type).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile

import llama_cpp
import numpy as np

from gpt2_conformance.api import gpt2, machine
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables
from gpt2_conformance.backends.thirdparty.llama_cpp import gguf_model

H_TENSOR = "inpL"  # llama.cpp's name for tok + pos embedding in its GPT-2 graph (gpt2.cpp)
HEAD_INPUT_TENSOR = "result_norm"  # ln_f's output, the input of the tied head (gpt2.cpp: cb(cur, "result_norm"))
PAST_TOKEN = 0  # what fills the cache before a row decoded at past_length > 0
CONTEXT = 0  # llama.cpp's n_ctx: 0 = the model's trained context (1024 for GPT-2)
STOP_AFTER_H = True  # end the graph's evaluation once h is read (module docstring)
_NE_OFFSET = 16  # struct ggml_tensor: enum type (4 + 4 padding), buffer pointer (8), then int64_t ne[4]


def _ggml_base():
    """libggml-base from the wheel's lib folder: ggml_get_name, ggml_nbytes and
    ggml_backend_tensor_get/set for the eval callback (llama_cpp binds none of them)."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    lib.ggml_get_name.restype, lib.ggml_get_name.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.ggml_nbytes.restype, lib.ggml_nbytes.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.restype = None
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    lib.ggml_backend_tensor_set.restype = None
    lib.ggml_backend_tensor_set.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    return lib


class _Engine:
    """One process's llama.cpp: backend initialised once, one log sink, one ggml library."""

    _instance = None

    def __init__(self) -> None:
        llama_cpp.llama_backend_init()
        self.ggml = _ggml_base()
        self.log: list[str] = []

        @llama_cpp.llama_log_callback
        def sink(level, text, user_data):
            self.log.append(text.decode(errors="replace"))

        self._sink = sink  # kept alive: llama.cpp holds the pointer
        llama_cpp.llama_log_set(sink, None)

    @classmethod
    def get(cls) -> _Engine:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


class LlamaCppAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=("float32",),
        devices=("cpu",),
        kv_cache=True,
        tied_head=True,
        init=False,
        gradients=False,
        mutable_tables=False,
        black_box="GPT-2 GGUF (gguf.GGUFWriter, one zero block) run by llama.cpp through llama-cpp-python's C API; "
        "h = the graph's 'inpL' tensor read by the eval callback (cb_eval); offset = past_length tokens "
        "decoded into the KV cache before the row; logits = its tied head with h_final written into its "
        "input ('result_norm') by the callback",
    )

    @classmethod
    def implementation(cls) -> str:
        from importlib.metadata import version

        return (
            f"llama.cpp (llama-cpp-python {version('llama-cpp-python')}, CPU) running a GPT-2 GGUF written by "
            f"gguf {version('gguf')}"
        )

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.framework_dtype({"float32": np.float32})
        self.engine = _Engine.get()
        self.model = self.ctx = None
        self._wte = self._wpe = None
        self._captured: list[np.ndarray] = []  # h of the call in flight, one array per graph evaluation
        self._capture_error = ""
        self._head_input: np.ndarray | None = None  # set while logits() runs: h_final rows of one sequence

        @llama_cpp.ggml_backend_sched_eval_callback
        def observe(tensor, ask, user_data):
            # never raise through C: a problem is recorded and said after the call
            ggml = self.engine.ggml
            wanted = HEAD_INPUT_TENSOR if self._head_input is not None else H_TENSOR
            if ggml.ggml_get_name(tensor) != wanted.encode():
                return not ask  # ask: not wanted; after compute: go on
            if ask:
                return True
            ne = (ctypes.c_int64 * 4).from_address(tensor + _NE_OFFSET)
            buffer = self._head_input if self._head_input is not None else np.empty((ne[1], ne[0]), np.float32)
            if (ne[1], ne[0]) != buffer.shape or buffer.nbytes != ggml.ggml_nbytes(tensor):
                self._capture_error = (
                    f"llama.cpp's {wanted} holds {ggml.ggml_nbytes(tensor)} bytes as "
                    f"[{ne[1]}, {ne[0]}], not float32 {tuple(buffer.shape)}"
                )
                return False
            if self._head_input is not None:  # the head's input becomes h_final, before the head reads it
                ggml.ggml_backend_tensor_set(tensor, buffer.ctypes.data, 0, buffer.nbytes)
                self._captured.append(buffer)
                return True
            ggml.ggml_backend_tensor_get(tensor, buffer.ctypes.data, 0, buffer.nbytes)
            self._captured.append(buffer)
            return not STOP_AFTER_H

        self._observe = observe  # kept alive: the context holds the pointer

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        self._free()
        wte, wpe = np.array(wte, np.float32), np.array(wpe, np.float32)
        folder = tempfile.mkdtemp(prefix="gpt2c-llama-")
        try:
            path = os.path.join(folder, "gpt2.gguf")
            self.write_model(path, wte, wpe)
            model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
            if not model:
                raise RuntimeError(f"llama_model_load_from_file failed: {self._log_tail()}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # the model maps the file: its pages outlive the name
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = CONTEXT
        params.n_batch = params.n_ubatch = wpe.shape[0]
        params.n_threads = params.n_threads_batch = machine.threads()
        params.cb_eval = self._observe
        ctx = llama_cpp.llama_init_from_model(model, params)
        if not ctx:
            llama_cpp.llama_model_free(model)
            raise RuntimeError(f"llama_init_from_model failed: {self._log_tail()}")
        self.model, self.ctx, self._wte, self._wpe = model, ctx, wte, wpe

    def write_model(self, path: str, wte: np.ndarray, wpe: np.ndarray) -> None:
        """The GGUF llama.cpp loads, holding (wte, wpe): the backend's own (gguf_model.py); the file
        route (backends/files/gguf_file.py) writes a copy of a user's file instead."""
        gguf_model.write(path, wte, wpe)

    def tables(self):
        return self._wte.copy(), self._wpe.copy()

    def parameters(self):
        """The GGUF's tensors that the embedding and the head read: the head has no tensor of
        its own (no output.weight: llama.cpp ties it to token_embd)."""
        d = self.config.n_embd
        return {"token_embd.weight": (gpt2.N_VOCAB, d), "position_embd.weight": (gpt2.N_CTX, d)}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        """One sequence per row (module docstring); a batch of no rows decodes nothing."""
        ids = np.asarray(ids)
        rows = [self._decode_row(row, past_length) for row in ids]
        if not rows:
            return np.zeros((0, ids.shape[1] if ids.ndim == 2 else 0, self._wte.shape[1]), np.float32)
        return np.stack(rows)

    def _decode_row(self, row, past_length):
        past = np.full(past_length, PAST_TOKEN, np.int32)  # numpy refuses a negative or fractional length
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        if past.size:
            self._decode(past.tolist())
        self._start_capture()
        self._decode(row.tolist())
        return np.concatenate(self.captured(H_TENSOR))

    def _decode(self, tokens: list):
        """tokens into llama.cpp's cache, n_batch at a time as llama-cpp-python's Llama.eval feeds
        them (llama_decode asserts n_tokens <= n_batch: a caller's contract, not a check of input)."""
        for t in tokens:
            if not -(2**31) <= t < 2**31:
                raise OverflowError(
                    f"LlamaCppAdapter: token id {t} does not fit llama_token (int32_t), the type of "
                    "llama.cpp's batch; it cannot be passed to llama_decode"
                )
        n_batch = llama_cpp.llama_n_batch(self.ctx)
        for start in range(0, max(len(tokens), 1), n_batch):  # an empty row is one (empty) call
            chunk = tokens[start : start + n_batch]
            array = (llama_cpp.llama_token * len(chunk))(*chunk)
            self.engine.log.clear()
            self.check_status(llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(array, len(chunk))))

    def logits(self, h_final):
        """One sequence per row of h_final (module docstring: the head's input replaced)."""
        h_final = np.asarray(h_final)
        rows = [self._head_row(row) for row in h_final]
        if not rows:
            return np.zeros((0, h_final.shape[1] if h_final.ndim == 3 else 0, gpt2.N_VOCAB), np.float32)
        return np.stack(rows)

    def _head_row(self, row):
        n_batch = llama_cpp.llama_n_batch(self.ctx)
        pieces = []
        for start in range(0, max(len(row), 1), n_batch):  # an empty row is one (empty) call
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
            logits = self.head_call(np.ascontiguousarray(row[start : start + n_batch], np.float32), 0)
            pieces.append(logits.copy())  # llama.cpp's output buffer is reused by the next call
        return np.concatenate(pieces)

    def head_call(self, h_final, first_position: int) -> np.ndarray:
        """llama.cpp's head on h_final [T, d] (float32, contiguous): T placeholder tokens of
        sequence 0 at first_position.., each an output, their "result_norm" replaced by h_final;
        the tokens leave the cache afterwards. Returns a view of llama.cpp's logits buffer."""
        n = len(h_final)
        batch = llama_cpp.llama_batch_init(n, 0, 1)
        try:
            batch.n_tokens = n
            for i in range(n):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = PAST_TOKEN, first_position + i, 1, 1
                batch.seq_id[i][0] = 0
            self._start_capture()
            self._head_input = h_final
            self.engine.log.clear()
            code = llama_cpp.llama_decode(self.ctx, batch)
        finally:
            self._head_input = None
            llama_cpp.llama_batch_free(batch)
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self.ctx), 0, first_position, -1)
        self.check_status(code)
        self.captured(HEAD_INPUT_TENSOR)
        address = ctypes.cast(llama_cpp.llama_get_logits(self.ctx), ctypes.c_void_p).value
        if address is None:
            raise RuntimeError("llama_get_logits returned NULL: llama.cpp kept no logits for the head's batch")
        floats = (ctypes.c_float * (n * gpt2.N_VOCAB)).from_address(address)  # no copy: llama.cpp's memory
        # numpy's stubs list only some buffer types (on Python < 3.12); a ctypes array exports the buffer protocol
        return np.frombuffer(floats, np.float32).reshape(n, gpt2.N_VOCAB)  # type: ignore[call-overload]

    def _start_capture(self):
        self._captured.clear()
        self._capture_error = ""

    def captured(self, name: str) -> list:
        """What the eval callback read or wrote during the call that just returned 0: one array
        per graph evaluation; raises if it saw no tensor `name` or one it could not take."""
        if self._capture_error:
            raise RuntimeError(self._capture_error)
        if not self._captured:
            raise RuntimeError(f"llama_decode returned 0 but its graph computed no {name!r} tensor")
        return self._captured

    def check_status(self, code: int):
        """llama_decode's status as llama-cpp-python's LlamaContext.decode raises it, with the lines
        llama.cpp logged during the call."""
        if code != 0:
            raise RuntimeError(
                f"llama_decode returned {code}" + (f"; llama.cpp logged: {self._log_tail()}" if self.engine.log else "")
            )

    def _log_tail(self) -> str:
        return " ".join(line.strip() for line in self.engine.log[-6:] if line.strip())[:800]

    def _free(self):
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
        if self.model:
            llama_cpp.llama_model_free(self.model)
        self.model = self.ctx = None

    def __del__(self):
        try:
            self._free()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the process frees it all
            pass
