"""The files the file route is tested on (tests/test_file_route.py), each built here from a
randomly initialised Hugging Face GPT2LMHeadModel (one block, d = 768, no hub), as users make them:

- export_onnx(model, path, "logits"): torch.onnx.export (torch's default exporter) of the model's
  forward, input_ids in, logits out;
- "past_position_ids": inputs input_ids, attention_mask, position_ids and the cache
  past_key_values.0.key/value, outputs logits and present.0.key/value (Optimum's decoder layout);
- "past_mask": the same without position_ids: GPT2Model computes the positions from the cache's
  length (modeling_gpt2.py: cache.get_seq_length() + arange(T));
- write_gguf(model, path, "f32"|"f16"): the GGUF llama.cpp's convert_hf_to_gguf.py writes for
  GPT2LMHeadModel (gguf-py tensor names; c_attn/c_proj/c_fc transposed as its GPT2Model
  modify_tensors does; no output.weight: the head is tied; with f16, 2-D weights F16 and
  position_embd F32, as its prepare_tensors keeps POS_EMBD in F32).

And the file mutants, each a graph edit of a correct file:

- restart_positions: the wpe Gather's indices become 0..T-1 whatever the cache holds (position
  ids restarted at 0 once a cache is fed);
- untie_head: the head reads its own copy of wte (a copied initializer), not wte;
- refuse_negative_ids: the correct file for BOUNDS-TOKEN: ids < 0 become 50257 before the token
  Gather, which then raises (ONNX Gather wraps a negative index, so the export as torch writes it
  is the "negative ids wrapping" mutant of this one).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np

N_HEAD, N_EMBD, N_LAYER = 12, 768, 1
VARIANTS = ("logits", "past_position_ids", "past_mask")


def gpt2_model(seed: int = 0):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(n_layer=N_LAYER, n_embd=N_EMBD, n_head=N_HEAD, n_positions=1024, vocab_size=50257)
    return GPT2LMHeadModel(config).eval()


def _module(model, variant: str):
    import torch
    from transformers import DynamicCache

    def cache_of(key, value):
        cache = DynamicCache(config=model.config)
        layer = cache.layers[0]
        layer.lazy_initialization(key, value)  # what DynamicLayer.update does first, without its copy
        layer.keys, layer.values = key, value
        return cache

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = model

        def forward(self, input_ids):
            return self.lm(input_ids=input_ids, use_cache=False).logits

    class PastPositionIds(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = model

        def forward(self, input_ids, attention_mask, position_ids, past_key, past_value):
            out = self.lm(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache_of(past_key, past_value),
                use_cache=True,
            )
            layer = out.past_key_values.layers[0]
            return out.logits, layer.keys, layer.values

    class PastMask(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = model

        def forward(self, input_ids, attention_mask, past_key, past_value):
            out = self.lm(
                input_ids=input_ids, attention_mask=attention_mask, cache=cache_of(past_key, past_value), use_cache=True
            )
            layer = out.past_key_values.layers[0]
            return out.logits, layer.keys, layer.values

    return {"logits": Logits, "past_position_ids": PastPositionIds, "past_mask": PastMask}[variant]()


def export_onnx(model, path: str, variant: str = "logits") -> str:
    """`model` exported to `path` by torch.onnx.export (module docstring)."""
    import torch

    dim = torch.export.Dim
    batch, seq, past = 2, 5, 3  # sizes of 0 or 1 would be specialised by torch.export
    b, t = dim("batch"), dim("seq", min=1)
    ids = torch.zeros(batch, seq, dtype=torch.int64)
    cache = torch.zeros(batch, N_HEAD, past, N_EMBD // N_HEAD)
    cache_names = ["past_key_values.0.key", "past_key_values.0.value"]
    if variant == "logits":
        example, names, dynamic = (ids,), ["input_ids"], {"input_ids": {0: b, 1: t}}
        outputs = ["logits"]
    else:
        p, total = dim("past", min=1), dim("total", min=2)
        mask = torch.ones(batch, past + seq, dtype=torch.int64)
        dynamic = {"input_ids": {0: b, 1: t}, "attention_mask": {0: b, 1: total}}
        if variant == "past_position_ids":
            positions = torch.arange(past, past + seq).expand(batch, seq).contiguous()
            example = (ids, mask, positions, cache, cache.clone())
            names = ["input_ids", "attention_mask", "position_ids", *cache_names]
            dynamic["position_ids"] = {0: b, 1: t}
        else:
            example, names = (ids, mask, cache, cache.clone()), ["input_ids", "attention_mask", *cache_names]
        dynamic.update({"past_key": {0: b, 2: p}, "past_value": {0: b, 2: p}})
        outputs = ["logits", "present.0.key", "present.0.value"]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            _module(model, variant),
            example,
            dynamo=True,
            dynamic_shapes=dynamic,
            input_names=names,
            output_names=outputs,
        )
    program.save(path)
    return path


def write_gguf(model, path: str, dtype: str = "f32") -> str:
    """The GGUF convert_hf_to_gguf.py writes for `model` (module docstring)."""
    import gguf

    config = model.config
    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    writer = gguf.GGUFWriter(path, "gpt2")
    writer.add_name("gpt2-random-one-block")
    writer.add_context_length(config.n_positions)
    writer.add_embedding_length(config.n_embd)
    writer.add_feed_forward_length(4 * config.n_embd)
    writer.add_block_count(config.n_layer)
    writer.add_head_count(config.n_head)
    writer.add_layer_norm_eps(config.layer_norm_epsilon)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)
    n_vocab = config.vocab_size
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list([f"t{i}".encode() for i in range(n_vocab - 1)] + [b"<|endoftext|>"])
    writer.add_token_types([gguf.TokenType.NORMAL] * (n_vocab - 1) + [gguf.TokenType.CONTROL])
    writer.add_token_merges(["t0 t1"])
    writer.add_bos_token_id(n_vocab - 1)
    writer.add_eos_token_id(n_vocab - 1)

    def add(name: str, value: np.ndarray, keep_f32: bool = False) -> None:
        if dtype == "f16" and value.ndim == 2 and not keep_f32:
            writer.add_tensor(name, value.astype(np.float16))  # GGUFWriter types an F16 array F16
        else:
            writer.add_tensor(name, np.ascontiguousarray(value, np.float32))

    add("token_embd.weight", state["transformer.wte.weight"])
    add("position_embd.weight", state["transformer.wpe.weight"], keep_f32=True)  # POS_EMBD stays F32
    add("output_norm.weight", state["transformer.ln_f.weight"])
    add("output_norm.bias", state["transformer.ln_f.bias"])
    names = {
        "ln_1.weight": "attn_norm.weight",
        "ln_1.bias": "attn_norm.bias",
        "attn.c_attn.weight": "attn_qkv.weight",
        "attn.c_attn.bias": "attn_qkv.bias",
        "attn.c_proj.weight": "attn_output.weight",
        "attn.c_proj.bias": "attn_output.bias",
        "ln_2.weight": "ffn_norm.weight",
        "ln_2.bias": "ffn_norm.bias",
        "mlp.c_fc.weight": "ffn_up.weight",
        "mlp.c_fc.bias": "ffn_up.bias",
        "mlp.c_proj.weight": "ffn_down.weight",
        "mlp.c_proj.bias": "ffn_down.bias",
    }
    for layer in range(config.n_layer):
        for hf, name in names.items():
            value = state[f"transformer.h.{layer}.{hf}"]
            add(f"blk.{layer}.{name}", value.T.copy() if value.ndim == 2 else value)  # Conv1D weights transposed
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# -- mutants -------------------------------------------------------------------------------


def _load(path: str):
    import onnx

    return onnx.load(path)


def _save(model, path: str) -> str:
    import onnx

    onnx.save(model, path)
    return path


def _wpe_gather(model):
    inits = {i.name: i for i in model.graph.initializer}
    return next(
        n
        for n in model.graph.node
        if n.op_type == "Gather" and n.input[0] in inits and tuple(inits[n.input[0]].dims) == (1024, N_EMBD)
    )


def _wte_gather(model):
    inits = {i.name: i for i in model.graph.initializer}
    return next(
        n
        for n in model.graph.node
        if n.op_type == "Gather" and n.input[0] in inits and tuple(inits[n.input[0]].dims) == (50257, N_EMBD)
    )


def restart_positions(source: str, path: str) -> str:
    """The wpe Gather reads rows 0..T-1 (T = the ids' length), whatever the cache holds."""
    from onnx import TensorProto, helper

    model = _load(source)
    gather = _wpe_gather(model)
    ids = model.graph.input[0].name
    g = model.graph
    g.initializer.extend(
        [
            helper.make_tensor("mut_zero", TensorProto.INT64, [], [0]),
            helper.make_tensor("mut_one", TensorProto.INT64, [], [1]),
            helper.make_tensor("mut_axis0", TensorProto.INT64, [1], [0]),
        ]
    )
    nodes = [
        helper.make_node("Shape", [ids], ["mut_shape"], start=1, end=2),
        helper.make_node("Squeeze", ["mut_shape", "mut_axis0"], ["mut_len"]),
        helper.make_node("Range", ["mut_zero", "mut_len", "mut_one"], ["mut_range"]),
        helper.make_node("Unsqueeze", ["mut_range", "mut_axis0"], ["mut_positions"]),
    ]
    index = list(g.node).index(gather)
    for k, node in enumerate(nodes):
        g.node.insert(index + k, node)
    gather.input[1] = "mut_positions"
    return _save(model, path)


def untie_head(source: str, path: str) -> str:
    """The head's Transpose reads a copy of wte (its own initializer), not wte."""
    import onnx

    model = _load(source)
    wte = _wte_gather(model).input[0]
    table = next(i for i in model.graph.initializer if i.name == wte)
    copy = onnx.TensorProto()
    copy.CopyFrom(table)
    copy.name = "mut_lm_head_copy"
    model.graph.initializer.append(copy)
    for node in model.graph.node:
        if node.op_type == "Transpose" and node.input[0] == wte:
            node.input[0] = copy.name
    return _save(model, path)


def refuse_negative_ids(source: str, path: str) -> str:
    """ids < 0 become 50257 before the token Gather, which refuses that index."""
    from onnx import TensorProto, helper

    model = _load(source)
    gather = _wte_gather(model)
    g = model.graph
    g.initializer.extend(
        [
            helper.make_tensor("mut_zero_id", TensorProto.INT64, [], [0]),
            helper.make_tensor("mut_vocab", TensorProto.INT64, [], [50257]),
        ]
    )
    nodes = [
        helper.make_node("Less", [gather.input[1], "mut_zero_id"], ["mut_negative"]),
        helper.make_node("Where", ["mut_negative", "mut_vocab", gather.input[1]], ["mut_checked_ids"]),
    ]
    index = list(g.node).index(gather)
    for k, node in enumerate(nodes):
        g.node.insert(index + k, node)
    gather.input[1] = "mut_checked_ids"
    return _save(model, path)
