"""Build a Hugging Face `tokenizer.json` and `tokenizer_config.json` from GGUF metadata.

GGUF files carry their tokenizer as metadata (tokens, merges, token types, special ids,
chat template). We rebuild the equivalent fast tokenizer with the `tokenizers` library so
`mlx_lm.load` and llguidance see exactly the tokenizer llama.cpp would use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
)

from engine.errors import ModelLoadError

# llama.cpp token types (gguf.TokenType)
_UNKNOWN = 2
_CONTROL = 3
_USER_DEFINED = 4
_BYTE = 6

# Pre-tokenizer splits by `tokenizer.ggml.pre`, as in the families' own tokenizer.json files
# (llama.cpp's llama-vocab.cpp and transformers' GGUF loader list the same).
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_WORD_CASED = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+{c}"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*{c}"
)
_GPT4O_SPLIT = _WORD_CASED.replace("{c}", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?") + (
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_SPLIT = _WORD_CASED.replace("{c}", "") + (
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS = {
    **dict.fromkeys(("llama-bpe", "llama3", "dbrx", "smaug-bpe", "falcon3"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"), _QWEN2_SPLIT),
    **dict.fromkeys(("gpt-4o", "llama4"), _GPT4O_SPLIT),
    "tekken": _TEKKEN_SPLIT,
}


def _pre_tokenizer(pre: str) -> pre_tokenizers.PreTokenizer:
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        # SmolLM splits every digit on its own before the GPT-2 split.
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    if pre in _SPLITS:
        split = pre_tokenizers.Split(Regex(_SPLITS[pre]), behavior="isolated", invert=False)
        return pre_tokenizers.Sequence(
            [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    return byte_level


def _byte_level_bpe(meta: dict[str, Any], tokens: list[str]) -> Tokenizer:
    """GPT-2 style byte-level BPE (Llama 3, SmolLM, Qwen...)."""
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    tokenizer.pre_tokenizer = _pre_tokenizer(str(meta.get("tokenizer.ggml.pre", "gpt2")))
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _sentencepiece_bpe(meta: dict[str, Any], tokens: list[str], types: list[int]) -> Tokenizer:
    """SentencePiece BPE with byte fallback (Llama 2, Mistral, Phi-3, Gemma...).

    GGUF stores pieces with scores but no merges; as Hugging Face's converter does, every
    split of a piece into two known pieces is a merge, ranked by the merged piece's score.
    Gemma's files need two fixes (as transformers' GGUF loader makes them): pieces of only
    spaces are stored as real spaces rather than "▁" (the caller renames them:
    `_gemma_spaces`), and its scores do not follow its merge order, while the order of the
    pieces in the file does. Gemma adds no prefix space
    (`tokenizer.ggml.add_space_prefix` false).
    """
    gemma = _is_gemma(meta)
    scores_arr = meta.get("tokenizer.ggml.scores")
    if scores_arr is None or gemma:
        scores = [-float(i) for i in range(len(tokens))]
    else:
        scores = scores_arr.tolist()
    vocab = {tok: i for i, tok in enumerate(tokens)}
    mergeable = [
        (tok, score)
        for tok, score, kind in zip(tokens, scores, types, strict=True)
        if kind not in (_CONTROL, _BYTE, _UNKNOWN) and len(tok) > 1
    ]
    merges: list[tuple[str, str, float]] = []
    for piece, score in mergeable:
        local = [
            (piece[:i], piece[i:], score)
            for i in range(1, len(piece))
            if piece[:i] in vocab and piece[i:] in vocab
        ]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)
    unk_id = _scalar(meta, "tokenizer.ggml.unknown_token_id")
    unk = tokens[int(unk_id)] if unk_id is not None else None
    tokenizer = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=[(a, b) for a, b, _ in merges],
            unk_token=unk,
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    prefix = _scalar(meta, "tokenizer.ggml.add_space_prefix")
    add_prefix = (not gemma) if prefix is None else bool(prefix)
    replace = normalizers.Replace(" ", "▁")
    steps: list[Any] = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_prefix:
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), replace])
        steps.append(decoders.Strip(" ", 1, 0))
    else:
        tokenizer.normalizer = replace
    tokenizer.decoder = decoders.Sequence(steps)
    return tokenizer


def _is_gemma(meta: dict[str, Any]) -> bool:
    return str(meta.get("general.architecture", "")).startswith("gemma")


def _gemma_spaces(tokens: list[str]) -> list[str]:
    """Gemma's pieces of only spaces as SentencePiece writes them ("▁" for each space)."""
    return ["▁" * len(t) if t and not t.strip(" ") else t for t in tokens]


def _scalar(meta: dict[str, Any], key: str) -> Any:
    value = meta.get(key)
    if value is None:
        return None
    return value.item() if hasattr(value, "item") else value


def build_tokenizer_files(meta: dict[str, Any], out_dir: Path, source: Path) -> None:
    """Write tokenizer.json and tokenizer_config.json for the GGUF metadata `meta`.

    Raises ModelLoadError naming `source` when the tokenizer kind is not supported.
    """
    kind = meta.get("tokenizer.ggml.model")
    if kind not in ("gpt2", "llama"):
        raise ModelLoadError(
            f"{source}: tokenizer not supported yet: {kind!r} "
            "(supported: byte-level BPE 'gpt2' and SentencePiece BPE 'llama')"
        )
    tokens = list(meta["tokenizer.ggml.tokens"])
    types_arr = meta.get("tokenizer.ggml.token_type")
    token_types = types_arr.tolist() if types_arr is not None else [1] * len(tokens)
    if kind == "gpt2":
        tokenizer = _byte_level_bpe(meta, tokens)
    else:
        # Gemma's space pieces are user-defined: renamed before both the vocabulary and the
        # added tokens are made, so each keeps its own id (added under their file names they
        # were new tokens past the model's vocabulary, ids its embedding does not have).
        if _is_gemma(meta):
            tokens = _gemma_spaces(tokens)
        tokenizer = _sentencepiece_bpe(meta, tokens, token_types)
    added = [
        # a piece of "▁" is matched in the normalized text (where spaces are "▁")
        AddedToken(tok, special=t == _CONTROL, normalized=bool(tok) and not tok.strip("▁"))
        for tok, t in zip(tokens, token_types, strict=True)
        if t in (_CONTROL, _USER_DEFINED)
    ]
    tokenizer.add_special_tokens([a for a in added if a.special])
    tokenizer.add_tokens([a for a in added if not a.special])
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))

    def token_at(key: str) -> str | None:
        idx = _scalar(meta, key)
        return tokens[int(idx)] if idx is not None and 0 <= int(idx) < len(tokens) else None

    arch = _scalar(meta, "general.architecture") or "llama"
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": int(_scalar(meta, f"{arch}.context_length") or 4096),
        "clean_up_tokenization_spaces": False,
        "add_bos_token": bool(_scalar(meta, "tokenizer.ggml.add_bos_token") or False),
        "add_eos_token": bool(_scalar(meta, "tokenizer.ggml.add_eos_token") or False),
    }
    for name in ("bos", "eos", "unk", "pad"):
        key = "padding" if name == "pad" else ("unknown" if name == "unk" else name)
        tok = token_at(f"tokenizer.ggml.{key}_token_id")
        if tok is not None:
            config[f"{name}_token"] = tok
    template = meta.get("tokenizer.chat_template")
    if isinstance(template, str) and template.strip():
        config["chat_template"] = template
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    special_map = {k: v for k, v in config.items() if k.endswith("_token") and isinstance(v, str)}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special_map, indent=2))
