"""GGUF architectures mapped onto mlx-lm's own model classes.

For each family: llama.cpp's tensor names onto mlx-lm's module paths, what llama.cpp's
converter changed in the weights (the q/k row permutation of llama, Gemma's `1 + w` norms),
and the GGUF metadata keys onto the Hugging Face config mlx-lm reads. The conventions are
those of llama.cpp's `convert_hf_to_gguf.py`, as transformers' GGUF loader also undoes them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ModelLoadError

Meta = Mapping[str, Any]

_ATTN = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
}
_MLP = {"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_NORMS = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
_QK_NORMS = {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}
_GEMMA_NORMS = {
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.(\w+)\.(weight|bias)$")
_TOP_RE = re.compile(r"^(\w+)\.(weight|bias)$")


def _int(meta: Meta, key: str, default: int | None = None) -> int | None:
    value = meta.get(key)
    return default if value is None else int(value)


def _float(meta: Meta, key: str, default: float | None = None) -> float | None:
    value = meta.get(key)
    return default if value is None else float(value)


@dataclass(frozen=True)
class Architecture:
    """One GGUF architecture and the mlx-lm model class it becomes."""

    name: str  # general.architecture
    model_type: str  # mlx-lm's module
    hf_class: str
    layer_names: Mapping[str, str]
    permute_qk: bool = False  # llama.cpp permuted q/k rows for its rotary layout
    norm_plus_one: bool = False  # Gemma's norms are stored as 1 + w
    aux_tensors: tuple[str, ...] = ()  # read into the config, not weights
    extra_config: Callable[[Meta, dict[str, Any], dict[str, np.ndarray]], None] = field(
        default=lambda meta, config, aux: None
    )

    def key(self, suffix: str) -> str:
        return f"{self.name}.{suffix}"

    def mlx_name(self, gguf_name: str) -> str | None:
        """`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`; None if unknown."""
        if m := _BLOCK_RE.match(gguf_name):
            layer = self.layer_names.get(m.group(2))
            return f"model.layers.{m.group(1)}.{layer}.{m.group(3)}" if layer else None
        if m := _TOP_RE.match(gguf_name):
            top = _TOP.get(m.group(1))
            return f"{top}.{m.group(2)}" if top else None
        return None


def _llama_rope(meta: Meta, config: dict[str, Any], aux: dict[str, np.ndarray]) -> None:
    """Llama 3.1+ GGUFs carry their rope scaling only as a `rope_freqs` tensor of
    per-frequency divisors; find the llama3 parameters that produce it."""
    freqs = aux.get("rope_freqs.weight")
    if freqs is None:
        return
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    base = float(config["rope_theta"])
    inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    factor = float(np.max(freqs))
    for original in (8192, 4096, 16384, 32768, 2048, 65536, 131072):
        for low, high in ((1.0, 4.0), (1.0, 2.0), (1.0, 8.0)):
            smooth = (original / wavelen - low) / (high - low)
            expected = np.where(
                wavelen < original / high,
                1.0,
                np.where(wavelen > original / low, factor, 1 / ((1 - smooth) / factor + smooth)),
            )
            if expected.shape == freqs.shape and np.allclose(expected, freqs, rtol=1e-3):
                config["rope_scaling"] = {
                    "rope_type": "llama3",
                    "factor": factor,
                    "low_freq_factor": low,
                    "high_freq_factor": high,
                    "original_max_position_embeddings": original,
                }
                return
    raise ModelLoadError("rope_freqs does not match llama3 rope scaling with known settings")


def _gemma_scalar(meta: Meta, config: dict[str, Any], layers_27b: int) -> None:
    # llama.cpp scales queries by 1/sqrt(hidden/heads) for the 27B models, else by
    # 1/sqrt(head_dim); HF's query_pre_attn_scalar says the same.
    if config["num_hidden_layers"] == layers_27b:
        config["query_pre_attn_scalar"] = config["hidden_size"] // config["num_attention_heads"]
    else:
        config["query_pre_attn_scalar"] = config["head_dim"]


def _gemma2(meta: Meta, config: dict[str, Any], aux: dict[str, np.ndarray]) -> None:
    _gemma_scalar(meta, config, layers_27b=46)
    config["attn_logit_softcapping"] = _float(meta, "gemma2.attn_logit_softcapping", 50.0)
    config["final_logit_softcapping"] = _float(meta, "gemma2.final_logit_softcapping", 30.0)
    config["sliding_window"] = _int(meta, "gemma2.attention.sliding_window", 4096)


def _gemma3(meta: Meta, config: dict[str, Any], aux: dict[str, np.ndarray]) -> None:
    _gemma_scalar(meta, config, layers_27b=62)
    config["sliding_window"] = _int(meta, "gemma3.attention.sliding_window", 512)
    config["sliding_window_pattern"] = 6  # as llama.cpp: every sixth layer is global
    config["rope_local_base_freq"] = 10000.0
    config.setdefault("rope_theta", 1_000_000.0)


def _phi3(meta: Meta, config: dict[str, Any], aux: dict[str, np.ndarray]) -> None:
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    rotary = _int(meta, "phi3.rope.dimension_count", head_dim) or head_dim
    config["partial_rotary_factor"] = rotary / head_dim
    original = _int(meta, "phi3.rope.scaling.original_context_length")
    if original:
        config["original_max_position_embeddings"] = original
    long, short = aux.get("rope_factors_long.weight"), aux.get("rope_factors_short.weight")
    if long is not None and short is not None:
        config["rope_scaling"] = {
            "type": "longrope",
            "long_factor": [float(x) for x in long],
            "short_factor": [float(x) for x in short],
            "original_max_position_embeddings": original or 4096,
        }


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture(
            "llama",
            "llama",
            "LlamaForCausalLM",
            {**_ATTN, **_MLP, **_NORMS},
            permute_qk=True,
            aux_tensors=("rope_freqs.weight",),
            extra_config=_llama_rope,
        ),
        Architecture("qwen2", "qwen2", "Qwen2ForCausalLM", {**_ATTN, **_MLP, **_NORMS}),
        Architecture(
            "qwen3", "qwen3", "Qwen3ForCausalLM", {**_ATTN, **_MLP, **_NORMS, **_QK_NORMS}
        ),
        Architecture(
            "gemma2",
            "gemma2",
            "Gemma2ForCausalLM",
            {**_ATTN, **_MLP, **_GEMMA_NORMS},
            norm_plus_one=True,
            extra_config=_gemma2,
        ),
        Architecture(
            "gemma3",
            "gemma3_text",
            "Gemma3ForCausalLM",
            {**_ATTN, **_MLP, **_GEMMA_NORMS, **_QK_NORMS},
            norm_plus_one=True,
            extra_config=_gemma3,
        ),
        Architecture(
            "phi3",
            "phi3",
            "Phi3ForCausalLM",
            {
                "attn_qkv": "self_attn.qkv_proj",
                "attn_output": "self_attn.o_proj",
                "ffn_up": "mlp.gate_up_proj",  # gate and up fused, gate first
                "ffn_down": "mlp.down_proj",
                **_NORMS,
            },
            aux_tensors=("rope_factors_long.weight", "rope_factors_short.weight"),
            extra_config=_phi3,
        ),
    )
}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)
# Tensors llama.cpp writes that mlx-lm recomputes or does not use.
IGNORED_TENSORS = re.compile(r"^(rope_freqs|rope_factors_\w+)\.weight$")


def architecture_for(meta: Meta, source: Path) -> Architecture:
    """The Architecture of a GGUF file, or a ModelLoadError naming the file and the family."""
    arch = meta.get("general.architecture")
    found = ARCHITECTURES.get(str(arch))
    if found is None:
        raise ModelLoadError(
            f"{source}: architecture not supported yet: {arch} "
            f"(Corral imports {', '.join(SUPPORTED_ARCHITECTURES)})"
        )
    return found


def unpermute_rows(w: Any, n_head: int) -> Any:
    """Undo llama.cpp's q/k row permutation (it commutes with per-row quantization)."""
    rows = w.shape[0]
    rest = w.shape[1:]
    w = w.reshape(n_head, rows // n_head // 2, 2, *rest)
    return w.swapaxes(1, 2).reshape(rows, *rest)


def eos_token_ids(meta: Meta) -> list[int]:
    """Every token that ends a turn: eos, eot and eom ids, and the control tokens llama.cpp
    also treats as end of turn by their text (a GGUF often names only one of them)."""
    ids: list[int] = []
    for key in ("eos", "eot", "eom"):
        value = _int(meta, f"tokenizer.ggml.{key}_token_id")
        if value is not None and value not in ids:
            ids.append(value)
    tokens = meta.get("tokenizer.ggml.tokens")
    types = meta.get("tokenizer.ggml.token_type")
    if isinstance(tokens, list) and types is not None:
        enders = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|eom_id|>", "<EOT>"}
        for i, (tok, kind) in enumerate(zip(tokens, list(types), strict=False)):
            if int(kind) == 3 and tok in enders and i not in ids:
                ids.append(i)
    return ids


def model_config(arch: Architecture, meta: Meta, vocab: int, tied: bool) -> dict[str, Any]:
    """The Hugging Face style config mlx-lm's `arch.model_type` reads."""
    k = arch.key
    heads = _int(meta, k("attention.head_count"))
    hidden = _int(meta, k("embedding_length"))
    if heads is None or hidden is None:
        raise ModelLoadError("metadata lacks attention.head_count or embedding_length")
    config: dict[str, Any] = {
        "model_type": arch.model_type,
        "architectures": [arch.hf_class],
        "hidden_size": hidden,
        "num_hidden_layers": _int(meta, k("block_count")),
        "intermediate_size": _int(meta, k("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": _int(meta, k("attention.head_count_kv"), heads),
        "rms_norm_eps": _float(meta, k("attention.layer_norm_rms_epsilon"), 1e-6),
        "vocab_size": vocab,
        "max_position_embeddings": _int(meta, k("context_length"), 4096),
        "tie_word_embeddings": tied,
        "bos_token_id": _int(meta, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": eos_token_ids(meta),
    }
    theta = _float(meta, k("rope.freq_base"))
    if theta is not None:
        config["rope_theta"] = theta
    elif arch.name != "gemma3":
        config["rope_theta"] = 10000.0
    head_dim = _int(meta, k("attention.key_length"))
    if head_dim or arch.model_type in ("qwen3", "gemma2", "gemma3_text"):
        config["head_dim"] = head_dim or hidden // heads
    scaling = meta.get(k("rope.scaling.type"))
    factor = _float(meta, k("rope.scaling.factor"))
    if isinstance(scaling, str) and scaling not in ("none", "") and factor:
        config["rope_scaling"] = {"type": scaling, "factor": factor}
        original = _int(meta, k("rope.scaling.original_context_length"))
        if original:
            config["rope_scaling"]["original_max_position_embeddings"] = original
    return config
