"""The facts about GPT-2 that the spec checks, in one place.

Sources: openai/gpt-2 src/model.py (default_hparams, model(), positions_for) and the
paper's Table 2 (Radford et al., 2019). Each number below is quoted in SPEC.md.
"""

N_VOCAB = 50257  # wte rows: hparams.n_vocab, encoder.json has ids 0..50256
N_CTX = 1024  # wpe rows: hparams.n_ctx, the largest position is 1023

# n_embd of the four released sizes (paper Table 2; models/{124M,355M,774M,1558M}/hparams.json)
SIZES = {"124M": 768, "355M": 1024, "774M": 1280, "1558M": 1600}
N_EMBD_SMALL = SIZES["124M"]

# Official initialisers in model(): wpe uses random_normal_initializer(stddev=0.01),
# wte uses random_normal_initializer(stddev=0.02). Plain normal, not truncated.
WTE_INIT_STD = 0.02
WPE_INIT_STD = 0.01


def parameter_count(n_embd: int) -> dict[str, int]:
    """Trainable parameters of the embedding and the tied head: the head adds none."""
    return {"wte": N_VOCAB * n_embd, "wpe": N_CTX * n_embd}
