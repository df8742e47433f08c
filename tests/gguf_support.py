"""Tiny but complete llama GGUF files for import tests, written with the `gguf` package.

A file holds a byte-level BPE vocabulary (the 256 byte symbols plus ChatML's markers), a
ChatML template and one random float32 layer: it imports in well under a second, and two
files with different seeds have the same size and layout but different weights.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

HIDDEN = 32
HEADS = 4
FFN = 64
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _byte_symbols() -> list[str]:
    """GPT-2's printable stand-ins for the 256 byte values."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return [chr(c) for _, c in sorted(zip(keep, chars, strict=True))]


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """A one-layer llama GGUF at `path`; `seed` picks the weights (the size never changes)."""
    import gguf

    tokens = _byte_symbols() + SPECIAL
    types = [1] * 256 + [3] * len(SPECIAL)
    vocab = len(tokens)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(256)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(1)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([])
    writer.add_bos_token_id(256)
    writer.add_eos_token_id(258)
    writer.add_chat_template(CHATML)
    rng = np.random.default_rng(seed)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    writer.add_tensor("token_embd.weight", weights(vocab, HIDDEN))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    for name, shape in {
        "attn_norm": (HIDDEN,),
        "ffn_norm": (HIDDEN,),
        "attn_q": (HIDDEN, HIDDEN),
        "attn_k": (HIDDEN, HIDDEN),
        "attn_v": (HIDDEN, HIDDEN),
        "attn_output": (HIDDEN, HIDDEN),
        "ffn_gate": (FFN, HIDDEN),
        "ffn_up": (FFN, HIDDEN),
        "ffn_down": (HIDDEN, FFN),
    }.items():
        value = np.ones(shape, np.float32) if len(shape) == 1 else weights(*shape)
        writer.add_tensor(f"blk.0.{name}.weight", value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_arch_gguf(path: Path, arch: str) -> Path:
    """A GGUF of architecture `arch` holding only a small float32 token embedding: enough
    for the import's and the library's verdict on an architecture."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_tensor("token_embd.weight", np.zeros((8, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def train_sentencepiece(folder: Path, text: str, vocab_size: int, **options: Any) -> Any:
    """A SentencePiece BPE model trained on `text` in `folder`, configured as Llama 2's and
    Gemma's are (byte fallback, no normalisation, whitespace kept, digits split); `options`
    add to these or replace them. Skips the test when sentencepiece is not installed."""
    spm = pytest.importorskip("sentencepiece")
    (folder / "corpus.txt").write_text(text)
    settings: dict[str, Any] = {
        "model_type": "bpe",
        "byte_fallback": True,
        "character_coverage": 1.0,
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        "split_digits": True,
        "allow_whitespace_only_pieces": True,
        "minloglevel": 2,
    }
    spm.SentencePieceTrainer.train(
        input=str(folder / "corpus.txt"),
        model_prefix=str(folder / "m"),
        vocab_size=vocab_size,
        **(settings | options),
    )
    return spm.SentencePieceProcessor(model_file=str(folder / "m.model"))


def sentencepiece_token_type(sp: Any, i: int, user_defined: tuple[str, ...] = ()) -> int:
    """The llama.cpp token type (gguf.TokenType) of piece `i`, as its converter writes it."""
    if sp.is_unknown(i):
        return 2
    if sp.is_control(i):
        return 3
    if sp.is_byte(i):
        return 6
    return 4 if sp.id_to_piece(i) in user_defined else 1


def header_only_gguf(path: Path, *, tensors: int = 0, kvs: int = 0, tail: bytes = b"") -> Path:
    """A GGUF v3 header declaring `tensors` tensors and `kvs` metadata entries, then `tail`."""
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, tensors, kvs) + tail)
    return path
