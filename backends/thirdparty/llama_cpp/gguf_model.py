"""The GPT-2 GGUF the llama-cpp backend runs, written with the gguf package's GGUFWriter as
llama.cpp's convert_hf_to_gguf.py names a GPT-2 (arch "gpt2"; token_embd.weight [V, d],
position_embd.weight [1024, d], output_norm.weight/bias; no output.weight, so llama.cpp ties the
head to token_embd: src/models/gpt2.cpp, "if output is NULL, init from the input tok embed").

The model has one transformer block whose weights are all zero (llama.cpp refuses a model
without blocks: GGML_ASSERT(n_layer > 0) in llama-model.cpp), with a feed-forward width of 4
instead of 4d: the suite observes h, which llama.cpp computes before any block (inpL =
get_rows(tok_embd) + get_rows(pos_embd, inp_pos)), so the block cannot change it, and a full
width would cost a 4.8 GFLOP matmul pair per 1024 tokens. The vocabulary is synthetic (tokens
"t0".."t50255" and <|endoftext|>, one merge: llama.cpp's GPT-2 tokenizer needs merges): the suite
feeds token ids, never text.
"""

from __future__ import annotations

import numpy as np

N_HEAD = {768: 12, 1024: 16, 1280: 20, 1600: 25}  # GPT-2's released head counts
LAYER_NORM_EPS = 1e-5  # GPT-2's (HF GPT2Config.layer_norm_epsilon)
FEED_FORWARD = 4  # the zero block's hidden width (module docstring)


def write(path: str, wte: np.ndarray, wpe: np.ndarray) -> None:
    """A GPT-2 GGUF at `path` holding wte and wpe (float32), a unit ln_f and one zero block."""
    import gguf

    d = wte.shape[1]
    writer = gguf.GGUFWriter(path, "gpt2")
    writer.add_context_length(wpe.shape[0])
    writer.add_embedding_length(d)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(N_HEAD.get(d, max(1, d // 64)))
    writer.add_layer_norm_eps(LAYER_NORM_EPS)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    n_vocab = wte.shape[0]
    writer.add_token_list([f"t{i}".encode() for i in range(n_vocab - 1)] + [b"<|endoftext|>"])
    writer.add_token_types([gguf.TokenType.NORMAL] * (n_vocab - 1) + [gguf.TokenType.CONTROL])
    writer.add_token_merges(["t0 t1"])
    writer.add_bos_token_id(n_vocab - 1)
    writer.add_eos_token_id(n_vocab - 1)
    writer.add_tensor("token_embd.weight", np.ascontiguousarray(wte, np.float32))
    writer.add_tensor("position_embd.weight", np.ascontiguousarray(wpe, np.float32))
    writer.add_tensor("output_norm.weight", np.ones(d, np.float32))
    writer.add_tensor("output_norm.bias", np.zeros(d, np.float32))
    zero_block = {
        "attn_norm.weight": np.ones(d),
        "attn_norm.bias": np.zeros(d),
        "attn_qkv.weight": np.zeros((3 * d, d)),
        "attn_qkv.bias": np.zeros(3 * d),
        "attn_output.weight": np.zeros((d, d)),
        "attn_output.bias": np.zeros(d),
        "ffn_norm.weight": np.ones(d),
        "ffn_norm.bias": np.zeros(d),
        "ffn_up.weight": np.zeros((FEED_FORWARD, d)),
        "ffn_up.bias": np.zeros(FEED_FORWARD),
        "ffn_down.weight": np.zeros((d, FEED_FORWARD)),
        "ffn_down.bias": np.zeros(d),
    }
    for name, value in zero_block.items():
        writer.add_tensor(f"blk.0.{name}", value.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
