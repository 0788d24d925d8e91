"""The spec: every clause with a stable ID, its text and its source. SPEC.md is generated
from this registry (`gpt2-conformance spec > conformance/SPEC.md`; a test keeps them in sync).

Clause IDs are stable: a clause may be reworded, never renumbered. A new clause or a
stricter rule bumps SPEC_VERSION's minor number; removing a clause bumps the major.
"""

from __future__ import annotations

from dataclasses import dataclass

SPEC_VERSION = "1.6"  # CHANGES: what each version changed (SPEC.md's last section)
CHANGES: tuple[tuple[str, str], ...] = (
    ("1.1", "the GOLDEN clauses"),
    ("1.2", "TIED-LOGITS-FLOAT32, relations, past_length forms"),
    ("1.3", "the STATE group (updates seen, no side effects), sentinel ids in BOUNDS-TOKEN"),
    (
        "1.4",
        "DTYPE-OUTPUT (the dtype of h and logits, taken out of SHAPE-H), TIED-NO-BIAS reads the parameters, "
        "drawn update rows (STATE-UPDATES-SEEN, TIED-STORAGE), the POSITIONS relations reach 1023 across "
        "127/255/511",
    ),
    (
        "1.5",
        "LOOKUP-EXACT at the largest width (d = 1600, B = 1, T = 1024) and for embed(ids) with no "
        "past_length; BOUNDS-MESSAGE for past_length -1, a decode step past the end, ids of rank 1 or 3, "
        "logits of a malformed h_final and load_tables of malformed tables (each closes a survivor of "
        "reports/mutation-testing.md)",
    ),
    (
        "1.6",
        "every clause judges GPT-2, not the suite's habits: BOUNDS-MESSAGE is again the bounds errors alone, in "
        "any words and of any exception class (openai/gpt-2's own tf.gather raises InvalidArgumentError naming the "
        "index and the range), and spec 1.5's malformed-input cases leave it (what GPT-2 leaves open: the leading "
        "dimensions the head takes, a float64 table cast on load, the words of an error); BOUNDS-PAST-LENGTH no "
        "longer refuses an integral float or a bool (they read the right positions); h_final (TIED-LOGITS), the "
        "cotangents (TIED-GRAD) and the tables (LOOKUP-EXACT, DTYPE-FLOAT32-ROUNDTRIP) arrive in every memory "
        "layout, as ids already did; INIT-WTE and INIT-WPE at every claimed width",
    ),
)

MODEL_PY = "openai/gpt-2 src/model.py"  # as of commit 9b63575 (line numbers below)
PAPER = "Radford et al. 2019, Language Models are Unsupervised Multitask Learners"
SEED_EMBEDDING = "shared/seeds/000 (Token + Position Embedding study note)"
SEED_DIAGRAM = "shared/seeds/001 (GPT-2 embedding diagram, modeling_gpt2.py 493/576)"
SEED_WTE = "shared/seeds/003 (Understanding GPT-2 Token Embeddings)"
PROVENANCE = "shared/gpt2-reference/PROVENANCE.md"
SEED_LEARNED = "shared/seeds/000 (wte and wpe are learned with the model)"


@dataclass(frozen=True)
class Clause:
    id: str
    group: str
    title: str
    text: str
    source: str
    requires: tuple[str, ...] = ()  # Capabilities.claims() requirements; unmet -> "not claimed"


GROUPS = {
    "SHAPE": "Table and output shapes, parameter counts",
    "LOOKUP": "h = wte[X] + wpe[p], exactly",
    "POSITIONS": "Absolute positions offset by the cache",
    "BOUNDS": "Out-of-range input raises a clear error",
    "INIT": "Official initialisation",
    "TIED": "Tied output head",
    "DTYPE": "Reduced precision, against derived tolerances",
    "GOLDEN": "The real GPT-2 tables: bit-exact round trip, real rows, golden h",
    "STATE": "Every call reads the current tables and changes nothing else",
}

CLAUSES: tuple[Clause, ...] = (
    # -- SHAPE -----------------------------------------------------------------------
    Clause(
        "SHAPE-TABLES",
        "SHAPE",
        "Table shapes for the four released sizes",
        "For n_embd d in {768, 1024, 1280, 1600}, wte is [50257, d] and wpe is [1024, d].",
        f"{PAPER} Table 2 and sec. 2.3; {MODEL_PY} lines 152-155",
    ),
    Clause(
        "SHAPE-PARAMS",
        "SHAPE",
        "Parameter count; the tied head adds none",
        "The embedding and head own exactly two parameters, wte [50257, d] and wpe [1024, d]: "
        "38,597,376 + 786,432 = 39,383,808 at d = 768. The tied head adds 0 parameters.",
        f"{MODEL_PY} lines 152-155, 171; {SEED_DIAGRAM}",
    ),
    Clause(
        "SHAPE-H",
        "SHAPE",
        "h is [B, T, d]",
        "embed(ids [B, T], past_length) returns a [B, T, d] array (its dtype is DTYPE-OUTPUT's).",
        f"{MODEL_PY} line 157",
    ),
    Clause(
        "SHAPE-EMPTY",
        "SHAPE",
        "T = 0 gives [B, 0, d]",
        "An empty sequence (T = 0) is valid input and returns a [B, 0, d] array.",
        f"{MODEL_PY} lines 141-144 (positions_for uses tf.range(nsteps))",
    ),
    Clause(
        "SHAPE-LOGITS",
        "SHAPE",
        "Logits are [B, T, V]",
        "logits(h_final [B, T, d]) returns [B, T, 50257].",
        f"{MODEL_PY} lines 170-172",
        ("tied_head",),
    ),
    # -- LOOKUP ----------------------------------------------------------------------
    Clause(
        "LOOKUP-EXACT",
        "LOOKUP",
        "h == wte[X] + wpe[p] bit for bit in float32",
        "h[b, t] = wte[X[b, t]] + wpe[t] at past_length 0; in float32 this is one IEEE addition, "
        "so h equals the float32 sum bit for bit (tolerance 0), for every id in [0, 50257), every "
        "position in [0, 1024) (T up to 1024), batches up to 64, ids in any memory layout and tables "
        "loaded in any memory layout (Fortran order, strided and reversed views); also at "
        "the largest released width, d = 1600 (B = 1, T = 1024, where size 1600 is claimed), and for "
        "embed(ids) with no past_length (the protocol's default, 0). "
        "Offsets are POSITIONS-OFFSET's, which relates them to this forward.",
        f"{MODEL_PY} line 157; {SEED_EMBEDDING}",
    ),
    Clause(
        "LOOKUP-NO-SCALE",
        "LOOKUP",
        "No sqrt(d) or other scaling",
        "With wpe zeroed, no h[b, t] is c * wte[X[b, t]] for a factor c != 1; with wte zeroed, "
        "none is c * wpe[t]. No factor (sqrt(d) as in the Transformer base model, a max-norm "
        "renormalisation, or any other) is applied to either term, whatever the rows' norms.",
        f"{MODEL_PY} line 157; {SEED_EMBEDDING} (Watch-outs)",
    ),
    Clause(
        "LOOKUP-NO-EXTRA",
        "LOOKUP",
        "No token-type embedding, bias or norm on the sum",
        "With both tables zero, h is exactly zero: nothing else (a token-type or segment "
        "embedding, a bias, a LayerNorm) is added to or applied on the sum.",
        f"{MODEL_PY} line 157; {SEED_EMBEDDING}",
    ),
    Clause(
        "LOOKUP-NO-DROPOUT",
        "LOOKUP",
        "No dropout at inference",
        "In inference, embedding the same input again gives bit-identical outputs: no dropout "
        "mask (a deterministic 1/(1-p) rescale is LOOKUP-NO-SCALE's).",
        f"{MODEL_PY} (no dropout in the public graph); {SEED_EMBEDDING}",
    ),
    Clause(
        "LOOKUP-LEARNED-POSITIONS",
        "LOOKUP",
        "Positions come from the learned wpe table",
        "Changing wpe row p moves every element of h at position p and nothing else: positions "
        "are learned rows, not sinusoids or any function of p.",
        f"{MODEL_PY} lines 152-153, 157; {SEED_EMBEDDING}",
    ),
    Clause(
        "LOOKUP-BATCH-INDEPENDENT",
        "LOOKUP",
        "Batch rows are independent",
        "Each row of a batch (B up to 64) equals the same sequence embedded alone with the same past_length.",
        f"{MODEL_PY} lines 141-144, 157",
    ),
    Clause(
        "LOOKUP-ID-DTYPES",
        "LOOKUP",
        "int32 and int64 ids accepted",
        "ids of dtype int32 and int64 are both accepted and give the same h (each other's, bit "
        "for bit), for ids up to 50256.",
        f"{MODEL_PY} (X is int32 in the sampler); {SEED_WTE}",
    ),
    # -- POSITIONS -------------------------------------------------------------------
    Clause(
        "POSITIONS-OFFSET",
        "POSITIONS",
        "p_t = past_length + t",
        "With past_length k, token t of the input is embedded at position k + t, never t: the "
        "cached call equals rows k.. of the full forward of the whole sequence from past_length "
        "0, bit for bit. past_length may be a Python int, a numpy integer (np.int64, np.int32, "
        "np.intp) or a 0-d integer array; each acts exactly as the same int.",
        f"{MODEL_PY} lines 141-144, 156-157 (positions_for)",
        ("kv_cache",),
    ),
    Clause(
        "POSITIONS-DECODE",
        "POSITIONS",
        "Token-by-token decode equals the full forward",
        "Embedding one token at a time with past_length = t (ids a view all_ids[:, t:t+1] or a "
        "copy) equals row t of the full forward, bit for bit.",
        f"{MODEL_PY} lines 156-157; {SEED_EMBEDDING} (Watch-outs)",
        ("kv_cache",),
    ),
    Clause(
        "POSITIONS-CHUNKED",
        "POSITIONS",
        "Any chunked prefill equals the full forward",
        "Splitting a sequence into chunks at any points and embedding each chunk with "
        "past_length = its start gives the full forward's rows, bit for bit.",
        f"{MODEL_PY} lines 156-157",
        ("kv_cache",),
    ),
    Clause(
        "POSITIONS-BATCH-SHARED",
        "POSITIONS",
        "past_length is shared by the batch",
        "All batch rows use positions past_length + t (positions_for tiles one range over the "
        "batch): B rows (4 and 64) of one token give B copies of that row embedded alone.",
        f"{MODEL_PY} lines 135-144 (expand_tile, positions_for)",
        ("kv_cache",),
    ),
    # -- BOUNDS ----------------------------------------------------------------------
    Clause(
        "BOUNDS-LAST-POSITION",
        "BOUNDS",
        "Positions 0..1023 are valid, 1023 included",
        "T = 1024 from past_length 0, and T = 1 at past_length 1023, are valid and read wpe[1023]: "
        "changing that row moves h exactly at the last position.",
        f"{MODEL_PY} line 152 (n_ctx = 1024 rows); {SEED_DIAGRAM}",
    ),
    Clause(
        "BOUNDS-POSITION",
        "BOUNDS",
        "A position >= 1024 raises",
        "If past_length + T > 1024 (T > 1024, or a cache that is too long), embed raises an "
        "exception and returns nothing: no clamp, wrap, zero row or NaN.",
        f"{MODEL_PY} line 152; {SEED_EMBEDDING} (Out-of-range positions are a user-level error)",
    ),
    Clause(
        "BOUNDS-TOKEN",
        "BOUNDS",
        "A token id outside [0, 50257) raises",
        "An id < 0 or >= 50257 anywhere in ids makes embed raise, and a valid call afterwards "
        "answers as before; ids 0 and 50256 are valid. Among the bad ids, the sentinels real "
        "pipelines send are each checked explicitly (see Inputs drawn), as int64 and int32, alone "
        "and inside a valid batch, in a prefill and in a cached decode step. "
        "(numpy and torch indexing wrap -1 to the last row; tf.gather raises InvalidArgumentError on "
        "CPU, returns zero rows on GPU and clamps under XLA; JAX clamps or fills.)",
        f"{MODEL_PY} line 154 (n_vocab rows); shared/gpt2-reference/encoder.json (ids 0..50256); "
        "the sentinels' sources: see SENTINEL_IDS",
    ),
    Clause(
        "BOUNDS-PAST-LENGTH",
        "BOUNDS",
        "A negative or fractional past_length raises",
        "past_length < 0 (positions before the table's first row) or a fractional past_length (1.5: no "
        "position lies between two rows) raises. Valid forms: a Python int, a numpy integer, a 0-d integer "
        "array. What GPT-2 leaves open is not judged: an integral float (2.0) or a bool may be refused or "
        "read as the integer it equals.",
        f"{MODEL_PY} line 156 (past_length = tf.shape(past)[-2], a sequence length) and line 152 (wpe rows 0..1023)",
        ("kv_cache",),
    ),
    Clause(
        "BOUNDS-INPUT",
        "BOUNDS",
        "Non-integer ids and wrong rank raise",
        "ids of a float or bool dtype raise; ids of rank other than 2 ([B, T]) raise.",
        f"{MODEL_PY} lines 141-144 (X is [batch, sequence] of token ids)",
    ),
    Clause(
        "BOUNDS-MESSAGE",
        "BOUNDS",
        "The error is clear",
        "The error for an out-of-range position (T = 1025 from 0, and T = 30 at past_length 1000) or token "
        "id (50257, -1) names the offending value and the table size (1024 or 50257), in any words and of any "
        "exception class, as GPT-2's own gather does ('indices[0,1] = 50257 is not in [0, 50257)'). The "
        "words of other errors (a wrong rank, a malformed table) are left open.",
        f"{MODEL_PY} line 157 (tf.gather's CPU kernel refuses the index with InvalidArgumentError naming it "
        "and the range); "
        f"{SEED_EMBEDDING} (out-of-range positions are a user-level error)",
    ),
    # -- INIT ------------------------------------------------------------------------
    Clause(
        "INIT-WTE",
        "INIT",
        "wte ~ N(0, 0.02^2), plain normal",
        "After the implementation's own initialisation, wte's mean is 0, its std 0.02, and "
        "its values follow a normal (not truncated, not uniform) distribution. Tests: mean "
        "z-test, variance test, Kolmogorov-Smirnov against N(0, 0.02^2), and the mass beyond "
        "3 std; at every width the implementation claims (768, 1024, 1280, 1600: an std that depends on d "
        "is not GPT-2's), each test at false-alarm rate 6.25e-8, 1e-6 for the clause.",
        f"{MODEL_PY} lines 154-155 (random_normal_initializer(stddev=0.02))",
        ("init",),
    ),
    Clause(
        "INIT-WPE",
        "INIT",
        "wpe ~ N(0, 0.01^2), plain normal",
        "As INIT-WTE for wpe with std 0.01 (half of wte's), at every claimed width.",
        f"{MODEL_PY} lines 152-153 (random_normal_initializer(stddev=0.01)); {SEED_EMBEDDING}",
        ("init",),
    ),
    Clause(
        "INIT-DISTINCT",
        "INIT",
        "Tables are not zero and not copies",
        "After initialisation neither table is all zero, no two rows of a table are equal, wpe "
        "is not (a multiple of) wte's first 1024 rows, and two seeds give different tables.",
        f"{MODEL_PY} lines 152-155",
        ("init",),
    ),
    # -- TIED ------------------------------------------------------------------------
    Clause(
        "TIED-LOGITS",
        "TIED",
        "The head is h_final @ wte^T: no bias, no scale, no other matrix",
        "logits equal h_final @ wte^T within the bound of a matmul whose inputs were rounded to "
        "bfloat16 and accumulated in float32, (2u + u^2 + gamma_d(float32)(1 + u)^2) * (|h| @ "
        "|wte|^T), u = 2^-8, for h_final in any memory layout (Fortran order, strided and reversed "
        "views): reduced-precision matmuls (TF32, bfloat16) pass, another matrix, a scale or a bias do "
        "not. Float32 accuracy is TIED-LOGITS-FLOAT32's.",
        f"{MODEL_PY} lines 170-171 (tf.matmul(h_flat, wte, transpose_b=True))",
        ("tied_head",),
    ),
    Clause(
        "TIED-LOGITS-FLOAT32",
        "TIED",
        "The head is float32-accurate",
        "logits equal h_final @ wte^T within gamma_d(float32) * (|h| @ |wte|^T), the bound for "
        "any float32 summation order (Higham eq. 3.5). A GPU run whose float32 matmuls use TF32 "
        "fails here (and may waive it); the message names the input precision the errors fit.",
        f"{MODEL_PY} lines 170-171 (a float32 tf.matmul); the bound is Higham's, derived in "
        "conformance/runtime/numerics.py",
        ("tied_head",),
    ),
    Clause(
        "TIED-STORAGE",
        "TIED",
        "The head is wte itself",
        "Writing wte[i] in place (assign_wte_row) changes logit column i by h @ (new - old): the "
        "head reads the same storage, it holds no copy of any row. The rows are drawn (see Inputs "
        "drawn): always 0, a byte-level id below 256 and 50256, and several rows updated at once; "
        "the message names the row.",
        f"{MODEL_PY} line 171; {SEED_DIAGRAM} (0 new parameters)",
        ("tied_head", "mutable_tables"),
    ),
    Clause(
        "TIED-GRAD",
        "TIED",
        "dL/dwte carries the gather and the projection role",
        "For L = <G_h, h> + <G_l, h @ wte^T>, dL/dwte = scatter(G_h + G_l @ wte, X) + G_l^T h "
        "(h the implementation's own) and dL/dwpe = the batch sum of G_h + G_l @ wte at each "
        "position, within the float32 accumulation bound gamma_K, K = V + 2BT + 2, for cotangents in "
        "any memory layout.",
        f"{MODEL_PY} lines 157, 171 (wte used twice); {SEED_WTE}",
        ("tied_head", "gradients"),
    ),
    Clause(
        "TIED-NO-BIAS",
        "TIED",
        "No output bias",
        "The head has no bias: parameters() lists no parameter of one value per vocabulary entry "
        "([50257], [1, 50257], ...), zero or not (a zero-initialised bias is still trained), and "
        "logits(0) is exactly 0 as values (their dtype is DTYPE-OUTPUT's).",
        f"{MODEL_PY} line 171",
        ("tied_head",),
    ),
    # -- DTYPE -----------------------------------------------------------------------
    Clause(
        "DTYPE-FLOAT32-ROUNDTRIP",
        "DTYPE",
        "float32 tables round-trip bit for bit",
        "Tables loaded in float32, in any memory layout (Fortran order, strided and reversed views), read "
        "back bit for bit, and h is float32.",
        f"{MODEL_PY} lines 152-155 (wte and wpe are float32 variables; the released checkpoints store "
        f"float32: {PROVENANCE}); LOOKUP-EXACT needs the tables as loaded",
    ),
    Clause(
        "DTYPE-FLOAT16",
        "DTYPE",
        "float16 within 1 ulp; head within its derived bound",
        "Tables are stored rounded to float16 (nearest-even); h is within 1 float16 ulp (plus "
        "float32 rounding) of the implementation's own float32 h on the stored tables; logits "
        "are within u16 * |logits| + 2 gamma_d(float32) * (|h| @ |wte|^T) of its own float32 "
        "logits (the formula is LOOKUP-EXACT's and TIED's).",
        f"{MODEL_PY} lines 157, 171 computed in float16, as GPT-2 is served in half precision; the bound "
        "is derived (conformance/runtime/numerics.py), not tuned",
        ("dtype:float16",),
    ),
    Clause(
        "DTYPE-BFLOAT16",
        "DTYPE",
        "bfloat16 within 1 ulp; head within its derived bound",
        "As DTYPE-FLOAT16 with bfloat16 (u = 2^-8).",
        f"{MODEL_PY} lines 157, 171 computed in bfloat16; the bound is derived "
        "(conformance/runtime/numerics.py), not tuned",
        ("dtype:bfloat16",),
    ),
    Clause(
        "DTYPE-OUTPUT",
        "DTYPE",
        "h and logits come back in the claimed dtype",
        "For each claimed dtype, embed (at past_length 0 and with a cache) and logits return arrays "
        "of that dtype: float32 for float32, float16 for float16, and for bfloat16 the documented "
        "float32 carrier (numpy has no bfloat16; the float32 array holds the bfloat16 values, "
        "exactly). A float32 model whose head answers in float64, or a float16 model that widens h, "
        "fails here and nowhere else.",
        "the adapter protocol (api/adapter.py, Adapter: the dtypes of arrays in and out); "
        f"{MODEL_PY} lines 157, 171 (h and logits in the model's dtype)",
    ),
    # -- GOLDEN ----------------------------------------------------------------------
    # The golden tables: with --checkpoint, that checkpoint's wte and wpe; without, the
    # shipped real 124M wpe and a wte holding every known real value (fixtures/, derived
    # by fixtures/derive.py; unknown elements are a seeded stand-in, never compared).
    Clause(
        "GOLDEN-TABLES-ROUNDTRIP",
        "GOLDEN",
        "The golden tables round-trip bit for bit",
        "The golden tables loaded in float32 read back from tables() bit for bit. Shipped data: "
        "the real wpe (sha256 29c69587...be772, TF masked crc32c 718256369) and every known real "
        "wte value.",
        f"{PROVENANCE} (gpt2_wpe_float32_littleendian.bin, checks 1-2); fixtures/MANIFEST.json",
    ),
    Clause(
        "GOLDEN-WPE-ROWS",
        "GOLDEN",
        "embed reads the real wpe rows, cached offsets included",
        "With wte zero and the golden wpe loaded, embedding the ids of 'Software is changing how "
        "we' [25423, 318, 5609, 703, 356] at past_length 0, 1, 511 and 1019 returns the real GPT-2 "
        "wpe rows past_length + t bit for bit (the last is row 1023), and agrees with every value "
        "independent sources printed at that value's printed precision.",
        f"{PROVENANCE} (wpe checks 3-5; tokenizer check); shared/gpt2-reference/values.json (wpe)",
    ),
    Clause(
        "GOLDEN-H",
        "GOLDEN",
        "h for the golden sequences equals the golden vectors",
        "For ids whose wte values are known ([0, 1, 2, 3, 4], [50254, 50255, 50256], [40, 779, "
        "3644], [50256]) at past_length 0, 1, 511 and 1024 - T, each h element whose wte value is "
        "known equals the golden value computed from real values only: bit for bit where wte is "
        "known exactly, else within the printed precision plus float32 rounding.",
        f"{PROVENANCE} (wte, h); shared/gpt2-reference/values.json (wte, embedding_outputs_h); "
        "fixtures/derive.py (golden_h)",
    ),
    Clause(
        "GOLDEN-DECODE",
        "GOLDEN",
        "Cached decode at each golden offset equals the full forward",
        "With the golden tables, embedding each golden sequence one token at a time with "
        "past_length = offset + t equals row t of the full forward at that offset, bit for bit, "
        "for every golden offset (up to position 1023; the forward's values are GOLDEN-H's).",
        f"{MODEL_PY} lines 156-157; {PROVENANCE}",
        ("kv_cache",),
    ),
    Clause(
        "GOLDEN-LOGITS",
        "GOLDEN",
        "Tied logits for real h vectors match float64",
        "logits(h) for h = the golden sequences' embedding and the real wpe rows 0, 1, 2, 1022, "
        "1023 is within TIED-LOGITS' structural bound of the float64 h @ wte^T of the golden "
        "wte (float32 accuracy is TIED-LOGITS-FLOAT32's).",
        f"{MODEL_PY} lines 170-171; {PROVENANCE}",
        ("tied_head",),
    ),
    # -- STATE -----------------------------------------------------------------------
    Clause(
        "STATE-UPDATES-SEEN",
        "STATE",
        "A table update is seen by every later call",
        "After assign_wte_row(i, v), every later embed reads the new row i wherever ids hold i "
        "(ids embedded before the update included, in a prefill and in a cached decode step), and "
        "nothing else moves; the rows are drawn (see Inputs drawn: always 0, a byte-level id below "
        "256 and 50256, several rows at once, each also read elsewhere in the same call) and the "
        "message names the row; "
        "the later gradients use it; after load_tables(wte', wpe'), every later embed, logits and "
        "gradients answers as an adapter freshly loaded with wte', wpe' (bit for bit for h, within "
        "the structural bound for logits and gradients). No cache of gathered rows, of h or of a "
        "converted head outlives the tables it was made from. (The head after assign_wte_row is "
        "TIED-STORAGE's.)",
        f"{SEED_LEARNED}; {MODEL_PY} lines 154-157, 171 (wte read by every call)",
    ),
    Clause(
        "STATE-NO-SIDE-EFFECTS",
        "STATE",
        "Calls are pure reads: inputs untouched, outputs kept",
        "embed, logits and gradients never write into an array they are given (ids in every layout, "
        "h_final, the cotangents), never change an array they returned earlier (no reused output "
        "buffer: every h, logits and gradient returned stays as it was returned, after any later "
        "call), and never change the tables (tables() reads the same before and after). "
        "load_tables copies its arguments: a later assign_wte_row leaves the caller's arrays as they "
        "were. The suite keeps a private copy of every array it passes and every array it is given "
        "and compares after each later call.",
        f"{MODEL_PY} lines 141-157 (the embedding is a pure function of X, past and the tables); "
        "the adapter protocol (load_tables: 'Must copy')",
    ),
)

BY_ID = {c.id: c for c in CLAUSES}
assert len(BY_ID) == len(CLAUSES), "duplicate clause IDs"


def clause(clause_id: str) -> Clause:
    try:
        return BY_ID[clause_id]
    except KeyError:
        raise KeyError(f"unknown clause ID {clause_id!r}; known: {', '.join(BY_ID)}") from None


# The ids data pipelines put into id tensors as markers: (name, values, source). Each must raise.
SENTINEL_IDS = (
    (
        "-100",
        (-100,),
        "torch.nn.CrossEntropyLoss ignore_index default and Hugging Face's label padding "
        "(DataCollatorForSeq2Seq label_pad_token_id), which shared collators leak into input_ids",
    ),
    ("-1", (-1,), "padding in many loaders; torch.nn.Embedding(padding_idx=-1) counts it from the end"),
    (
        "50257..50303",
        tuple(range(50257, 50304)),
        "the padded-vocabulary rows: karpathy/nanoGPT model.py "
        "GPTConfig vocab_size = 50304 ('padded up to nearest multiple of 64'), vLLM "
        "vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE = 64",
    ),
    ("2^31 - 1", (2**31 - 1,), "int32's largest value, a C extension's 'no id' marker"),
    ("-2^31", (-(2**31),), "int32's smallest value; abs() of it overflows back to itself"),
    (
        "2^32 + k",
        (2**32, 2**32 + 5, 2**32 + 50256),
        "int64 ids that wrap to the valid ids 0, 5 and 50256 when narrowed to int32 unchecked (JAX without x64)",
    ),
)

# What a PASS covers: the inputs the suite's strategies draw (conformance/runtime/strategies.py)
DRAWN_INPUTS = (
    "Batch size B from 1 to 64 (T up to 1024 for B <= 3, up to 64 for B <= 16, up to 8 above), "
    "T from 1 (T = 0 is SHAPE-EMPTY's alone). Offsets drawn up to 64 in SHAPE-H and "
    "LOOKUP-BATCH-INDEPENDENT (their reach is POSITIONS-OFFSET's).",
    "Positions up to 1023 in LOOKUP-EXACT, the BOUNDS and GOLDEN clauses and POSITIONS-OFFSET, "
    "-DECODE and -CHUNKED, which always reach both sides of 127, 255, 511 and 1023 (where a position "
    "held in int8, uint8, a 9-bit or a 10-bit field wraps: offsets and chunk starts 120..135, "
    "250..261, 505..516, a decode step at every past_length 1016..1023); up to 1022 in "
    "LOOKUP-BATCH-INDEPENDENT and POSITIONS-BATCH-SHARED, whose last position is BOUNDS-LAST-POSITION's. "
    "A failing POSITIONS line names the first wrong position.",
    "Updated rows (STATE-UPDATES-SEEN, TIED-STORAGE): drawn, and always the fixed cases 0, 97 "
    "(byte-level, below 256), 50256 (<|endoftext|>, the eos/pad row) and rows 0, 255 and 50256 "
    "updated together; in STATE-UPDATES-SEEN the ids of each call read every updated row twice, "
    "among ids that are not updated (0, 255, 256, 50256 and drawn ones).",
    "Token ids: 0, 1, 2, 255, 256, 32767, 32768, 50255, 50256 and uniform draws; bad ids -1, -2, "
    "50257, 50258, -50257, 65536, 2^31 - 1, -2^31, 2^32, 2^32 + 5 and draws beyond each end.",
    "Sentinel ids, each an explicit BOUNDS-TOKEN case (not left to the draws), as int64 and int32 where "
    "the dtype holds it, alone and inside a valid batch, in a prefill and in a cached decode step: "
    + "; ".join(f"{name} ({why})" for name, _, why in SENTINEL_IDS)
    + ".",
    "ids as int64 or int32, in these memory layouts: C order, Fortran order, a column view "
    "(all_ids[:, -T:]), every other column (stride 2), reversed views (negative strides), read-only; "
    "h_final (for logits), the cotangents (for gradients) and the tables (for load_tables) in each of "
    "the non-C layouts too, columns being their last axis.",
    "past_length as a Python int, numpy.int64, numpy.int32, numpy.intp and 0-d int64/int32 arrays.",
)

THOROUGH_FACTOR = 10  # the thorough mode draws this many times each test's examples
DRAW_MODES = (
    "Default (`run`, and the pytest route): every draw is derandomized (hypothesis' derandomize, no "
    "example database), so the same suite version gives the same verdict on every run: a repeatable "
    "CI gate. Each drawn test makes 25 examples (the drawn LOOKUP-EXACT and BOUNDS-TOKEN tests: 40).",
    f"Thorough (`run --thorough`, `--gpt2c-thorough`): {THOROUGH_FACTOR} times the examples of every "
    "drawn test, from a random seed that the scorecard prints and the JSON report stores "
    "(environment.draws); `run --thorough --seed N` (`--gpt2c-thorough --gpt2c-seed N`) replays those "
    "draws exactly. The fixed cases (every id layout, the sentinel ids, the edge positions) are the "
    "same in both modes.",
    "Either mode with `run --no-shrink` (`--gpt2c-no-shrink`): the same draws, but a failing example is "
    "reported as first drawn instead of minimised (hypothesis' shrink phase is skipped). Verdicts are "
    "the same; a failing implementation is judged sooner, and its messages show a larger example. The "
    "JSON report stores it (environment.draws.shrink).",
    "A waived clause's failing examples are always reported as first drawn (its waiver names the "
    "deviation already; the JSON report lists those clauses in environment.draws.first_drawn): the "
    "same verdicts, and a third-party run spends nothing minimising examples no verdict reads.",
)


def markdown() -> str:
    """SPEC.md, generated from CLAUSES."""
    lines = [
        f"# GPT-2 embedding conformance spec, version {SPEC_VERSION}",
        "",
        "Generated from `conformance/spec.py` by `gpt2-conformance spec`; do not edit by hand.",
        "",
        "h[b, t] = wte[X[b, t]] + wpe[past_length + t]; logits = h_final @ wte^T.",
        "V = 50257, C = 1024, d in {768, 1024, 1280, 1600}.",
        "",
        "A clause whose `requires` the adapter does not claim is reported as *not claimed*; a "
        "clause whose cases need a claim only in part (an offset, a dtype) runs the rest and shows "
        "those cases as not claimed. The suite never calls what an adapter did not claim.",
        "",
        "## Inputs drawn",
        "",
        *[f"- {line}" for line in DRAWN_INPUTS],
        "",
        "## Draw modes",
        "",
        *[f"- {line}" for line in DRAW_MODES],
        "",
    ]
    for group, title in GROUPS.items():
        lines += [f"## {group}: {title}", ""]
        for c in CLAUSES:
            if c.group != group:
                continue
            lines += [f"### {c.id}: {c.title}", "", c.text, "", f"- Source: {c.source}"]
            if c.requires:
                lines.append(f"- Requires: {', '.join(c.requires)}")
            lines.append("")
    lines += ["## Versions", "", *[f"- {version}: {what}" for version, what in CHANGES], ""]
    return "\n".join(lines)
