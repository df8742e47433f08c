"""Tiny GGUF files written the way llama.cpp's converter writes them, for tests and benchmarks.

Each family gets random weights from mlx-lm's own model class (so the same weights can be
run as the reference), the family's real tensor names (from the `gguf` package's own name
map, not from Corral's), its metadata keys, a small tokenizer and a chat template. What the
converter changes on the way in is redone here independently of Corral's importer: llama's
q/k row permutation and Gemma's `1 + w` norms.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import gguf
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

T = GGMLQuantizationType
REPO = Path(__file__).resolve().parents[1]

_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
PHI3_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class Family:
    """One architecture as llama.cpp writes it."""

    arch: str  # general.architecture
    gguf_arch: gguf.MODEL_ARCH
    model_type: str  # mlx-lm module
    tokenizer: str  # tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
    specials: tuple[str, ...]
    template: str
    config: dict[str, Any]


_BASE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 2048,
}
FAMILIES: dict[str, Family] = {
    f.arch: f
    for f in (
        Family(
            "llama",
            gguf.MODEL_ARCH.LLAMA,
            "llama",
            "gpt2",
            ("<|begin_of_text|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>"),
            CHATML,
            {**_BASE, "rope_theta": 500000.0, "tie_word_embeddings": False},
        ),
        Family(
            "qwen2",
            gguf.MODEL_ARCH.QWEN2,
            "qwen2",
            "gpt2",
            ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
            CHATML,
            {**_BASE, "rope_theta": 1000000.0, "tie_word_embeddings": True},
        ),
        Family(
            "qwen3",
            gguf.MODEL_ARCH.QWEN3,
            "qwen3",
            "gpt2",
            ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
            CHATML,
            {**_BASE, "rope_theta": 1000000.0, "head_dim": 32, "tie_word_embeddings": True},
        ),
        Family(
            "gemma2",
            gguf.MODEL_ARCH.GEMMA2,
            "gemma2",
            "llama",
            ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
            GEMMA_TEMPLATE,
            {
                **_BASE,
                "head_dim": 32,
                "rope_theta": 10000.0,
                "query_pre_attn_scalar": 32,
                "attn_logit_softcapping": 50.0,
                "final_logit_softcapping": 30.0,
            },
        ),
        Family(
            "gemma3",
            gguf.MODEL_ARCH.GEMMA3,
            "gemma3_text",
            "llama",
            ("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
            GEMMA_TEMPLATE,
            {
                **_BASE,
                "num_hidden_layers": 6,  # one global layer after five sliding ones
                "head_dim": 32,
                "rope_theta": 1000000.0,
                "rope_local_base_freq": 10000.0,
                "query_pre_attn_scalar": 32,
                "sliding_window": 512,
                "sliding_window_pattern": 6,
            },
        ),
        Family(
            "phi3",
            gguf.MODEL_ARCH.PHI3,
            "phi3",
            "llama",
            ("<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>"),
            PHI3_TEMPLATE,
            {**_BASE, "rope_theta": 10000.0, "max_position_embeddings": 4096},
        ),
    )
}


def corpus() -> str:
    """Text to train the tiny tokenizers on: this repository's engine sources."""
    return "\n".join(p.read_text() for p in sorted((REPO / "engine").glob("*.py")))


def train_byte_level_bpe(specials: tuple[str, ...], vocab_size: int = 400) -> Any:
    """A small byte-level BPE (Qwen2's split) trained on `corpus()`: a `tokenizers.Tokenizer`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([corpus()], trainer)
    return tok


def _bpe_metadata(tok: Any, specials: tuple[str, ...]) -> dict[str, Any]:
    import json

    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return {
        "model": "gpt2",
        "pre": "qwen2",
        "tokens": tokens,
        "types": [3 if t in specials else 1 for t in tokens],
        "merges": merges,
    }


def _spm_metadata(specials: tuple[str, ...]) -> dict[str, Any]:
    """A SentencePiece vocabulary as llama.cpp stores it: specials, 256 byte pieces, then
    pieces of a few letters with decreasing scores."""
    tokens = list(specials) + [f"<0x{b:02X}>" for b in range(256)]
    types = [3] * len(specials) + [6] * 256
    letters = "etaoinshrdlu"
    pieces = ["\u2581"] + list(letters)
    pieces += ["\u2581" + a for a in letters] + [a + b for a in letters[:6] for b in letters[:6]]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * (len(specials) + 256) + [-float(i) for i in range(len(pieces))]
    return {"model": "llama", "tokens": tokens, "types": types, "scores": scores}


def tokenizer_metadata(family: Family) -> dict[str, Any]:
    """The tokenizer metadata of `family`'s tiny GGUF (cached: training takes a second)."""
    return _tokenizer_metadata(family.arch)


@functools.lru_cache(maxsize=8)
def _tokenizer_metadata(arch: str) -> dict[str, Any]:
    family = FAMILIES[arch]
    if family.tokenizer == "gpt2":
        return _bpe_metadata(train_byte_level_bpe(family.specials), family.specials)
    return _spm_metadata(family.specials)


def random_weights(family: Family, vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights under mlx-lm's names, norms and biases randomised too."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    module = importlib.import_module(f"mlx_lm.models.{family.model_type}")
    config = {**family.config, "model_type": family.model_type, "vocab_size": vocab}
    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config))
    rng = np.random.default_rng(seed)
    out = {}
    leaves = cast(list[tuple[str, Any]], tree_flatten(model.parameters()))
    for name, value in leaves:
        arr = np.array(value, dtype=np.float32)
        if arr.ndim == 1:  # norms start at 1 (or 0 for Gemma's 1 + w) and biases at 0
            arr = arr + rng.normal(0, 0.1, arr.shape).astype(np.float32)
        elif "embed_tokens" in name:
            arr = arr * 2
        out[name] = arr
    if family.arch.startswith("gemma"):  # Gemma ties its output head to the embedding
        out.pop("lm_head.weight", None)
    return out


def random_quant_blocks(
    qtype: GGMLQuantizationType, rows: int, cols: int, rng: np.random.Generator
) -> np.ndarray:
    """Random but well-formed blocks: random quant bits, and finite, modest float16 scales
    (d, and dmin where the type has one) at the offsets llama.cpp's block structs use."""
    block, size = GGML_QUANT_SIZES[qtype]
    n = rows * cols // block
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    halves = {
        T.Q4_0: (0,),
        T.Q4_1: (0, 2),
        T.Q5_0: (0,),
        T.Q5_1: (0, 2),
        T.Q8_0: (0,),
        T.Q2_K: (80, 82),
        T.Q3_K: (108,),
        T.Q4_K: (0, 2),
        T.Q5_K: (0, 2),
        T.Q6_K: (208,),
    }[qtype]
    for offset in halves:
        d = rng.uniform(0.5e-3, 4e-3, size=n).astype(np.float16)
        raw[:, offset : offset + 2] = d.view(np.uint8).reshape(n, 2)
    return raw.reshape(rows, cols // block * size)


def _to_gguf(family: Family, name: str, w: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """What llama.cpp's converter does to a tensor before writing it."""
    if family.arch == "llama" and name.endswith(("q_proj.weight", "k_proj.weight")):
        heads = config["num_attention_heads" if "q_proj" in name else "num_key_value_heads"]
        rows, cols = w.shape
        w = w.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)
    if family.arch.startswith("gemma") and name.endswith("norm.weight"):
        w = w + 1
    return w


def write_family_gguf(
    path: Path,
    family: Family,
    weights: dict[str, np.ndarray],
    tokenizer: dict[str, Any],
    *,
    linear_type: GGMLQuantizationType = T.F32,
) -> Path:
    """Write `weights` (mlx-lm names) as a GGUF file of `family` at `path`.

    Args:
        linear_type: F32 keeps the weights exact; a quantized type stores the 2-D weights
            with the `gguf` package's quantizer (types it can quantize: Q4_0..Q8_0).
    """
    config = family.config
    names = gguf.get_tensor_name_map(family.gguf_arch, config["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(path), family.arch)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(config["rope_theta"])
    if "head_dim" in config:
        writer.add_key_length(config["head_dim"])
        writer.add_value_length(config["head_dim"])
    if family.arch == "gemma2":
        writer.add_attn_logit_softcapping(config["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(config["final_logit_softcapping"])
    if "sliding_window" in config:
        writer.add_sliding_window(config["sliding_window"])
    if family.arch == "phi3":
        writer.add_rope_dimension_count(config["hidden_size"] // config["num_attention_heads"])
    writer.add_tokenizer_model(tokenizer["model"])
    if "pre" in tokenizer:
        writer.add_tokenizer_pre(tokenizer["pre"])
    writer.add_token_list(tokenizer["tokens"])
    writer.add_token_types(tokenizer["types"])
    if "merges" in tokenizer:
        writer.add_token_merges(tokenizer["merges"])
    if "scores" in tokenizer:
        writer.add_token_scores(tokenizer["scores"])
    if family.arch.startswith("gemma"):
        writer.add_add_space_prefix(False)
    tokens = tokenizer["tokens"]
    end = next(s for s in ("<|im_end|>", "<end_of_turn>", "<|end|>") if s in family.specials)
    writer.add_eos_token_id(tokens.index("<eos>" if "<eos>" in tokens else end))
    bos = next((s for s in ("<bos>", "<s>") if s in tokens), family.specials[0])
    writer.add_bos_token_id(tokens.index(bos))
    writer.add_chat_template(family.template)
    for name, w in weights.items():
        module, _, kind = name.rpartition(".")
        gguf_name = names.get_name(module)
        if gguf_name is None:
            raise KeyError(f"gguf has no name for {module}")
        w = _to_gguf(family, name, w, config)
        if w.ndim == 2 and linear_type != T.F32:
            writer.add_tensor(
                f"{gguf_name}.{kind}", gguf.quants.quantize(w, linear_type), raw_dtype=linear_type
            )
        else:
            writer.add_tensor(f"{gguf_name}.{kind}", w.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def llama_writer(
    path: Path,
    *,
    layers: int,
    context: int,
    hidden: int,
    ffn: int,
    heads: int,
    kv: int,
    vocab: int | None = None,
) -> gguf.GGUFWriter:
    """A GGUFWriter holding a llama's hyperparameters and the llama fixture's tokenizer
    (byte-level BPE, ChatML; padded with unused tokens up to `vocab`): tensors still to add.
    """
    tok = tokenizer_metadata(FAMILIES["llama"])
    pad = (vocab or len(tok["tokens"])) - len(tok["tokens"])
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tok["tokens"] + [f"<extra_{i}>" for i in range(pad)])
    writer.add_token_types(tok["types"] + [4] * pad)
    writer.add_token_merges(tok["merges"])
    writer.add_eos_token_id(tok["tokens"].index("<|im_end|>"))
    writer.add_chat_template(CHATML)
    return writer


def write_quant_gguf(
    path: Path, qtype: GGMLQuantizationType, *, hidden: int = 256, seed: int = 0
) -> Path:
    """A one-layer llama whose every 2-D weight is random, well-formed `qtype` blocks."""
    vocab = len(tokenizer_metadata(FAMILIES["llama"])["tokens"])
    rng = np.random.default_rng(seed)
    heads, kv, ffn = 4, 2, hidden * 2
    head_dim = hidden // heads
    shapes = {
        "token_embd.weight": (vocab, hidden),
        "blk.0.attn_q.weight": (hidden, hidden),
        "blk.0.attn_k.weight": (kv * head_dim, hidden),
        "blk.0.attn_v.weight": (kv * head_dim, hidden),
        "blk.0.attn_output.weight": (hidden, hidden),
        "blk.0.ffn_gate.weight": (ffn, hidden),
        "blk.0.ffn_up.weight": (ffn, hidden),
        "blk.0.ffn_down.weight": (hidden, ffn),
    }
    writer = llama_writer(path, layers=1, context=2048, hidden=hidden, ffn=ffn, heads=heads, kv=kv)
    for name, (rows, cols) in shapes.items():
        writer.add_tensor(name, random_quant_blocks(qtype, rows, cols, rng), raw_dtype=qtype)
    for name in ("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"):
        writer.add_tensor(name, (1 + rng.normal(0, 0.1, hidden)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
