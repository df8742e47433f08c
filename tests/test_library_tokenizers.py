"""Tokenizers of the new GGUF families, rebuilt from metadata, encode like the originals:
Qwen's byte-level BPE with its own split, and Gemma's SentencePiece (no prefix space,
whitespace pieces stored as spaces, merge order from the file's order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf_support import sentencepiece_token_type, train_sentencepiece
from tokenizers import Tokenizer

from benchmarks.gguf_fixtures import FAMILIES, corpus, tokenizer_metadata, train_byte_level_bpe
from engine.library.gguf_tokenizer import build_tokenizer_files

SAMPLES = [
    "Hello world, the engine runs 42 models and 12345 tokens!",
    "  two leading spaces,\ttabs\nand new lines\n\n    indented code",
    "émoji 🦙 and ünïcödé, plus 中文 that falls back to bytes",
    "def generate_reply(loaded, prompt_cache):\n    return 3.14159  # it's done",
]


def test_qwen2_byte_level_bpe_matches_the_original(tmp_path: Path) -> None:
    family = FAMILIES["qwen2"]
    original = train_byte_level_bpe(family.specials)
    tok = tokenizer_metadata(family)
    meta = {
        "general.architecture": "qwen2",
        "qwen2.context_length": 32768,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": tok["tokens"],
        "tokenizer.ggml.token_type": np.array(tok["types"], np.int32),
        "tokenizer.ggml.merges": tok["merges"],
        "tokenizer.ggml.eos_token_id": tok["tokens"].index("<|im_end|>"),
    }
    build_tokenizer_files(meta, tmp_path, Path("qwen.gguf"))
    rebuilt = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in SAMPLES + ["<|im_start|>user\nhi<|im_end|>"]:
        expected = original.encode(text).ids
        assert rebuilt.encode(text, add_special_tokens=False).ids == expected, text
        assert rebuilt.decode(expected, skip_special_tokens=False) == text
    # Qwen splits numbers into single digits before BPE, unlike Llama 3's runs of three.
    digits = rebuilt.pre_tokenizer.pre_tokenize_str("12345")
    assert [piece for piece, _ in digits] == ["1", "2", "3", "4", "5"]
    config = (tmp_path / "tokenizer_config.json").read_text()
    assert '"model_max_length": 32768' in config


GEMMA_SYMBOLS = ("<start_of_turn>", "<end_of_turn>")


@pytest.fixture(scope="module")
def gemma_like_spm(tmp_path_factory: pytest.TempPathFactory):
    """A SentencePiece BPE configured like Gemma's: no dummy prefix, byte fallback, split
    digits, whitespace pieces kept."""
    return train_sentencepiece(
        tmp_path_factory.mktemp("gemma-spm"),
        corpus(),
        900,
        add_dummy_prefix=False,
        user_defined_symbols=list(GEMMA_SYMBOLS),
    )


def test_gemma_sentencepiece_matches_the_original(gemma_like_spm, tmp_path: Path) -> None:
    sp = gemma_like_spm
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    # As in Gemma's GGUF files: pieces of only "▁" are written as real spaces, and the
    # scores are not the merge order (here: all equal), while the pieces' order is.
    pieces = [" " * len(p) if p and set(p) == {"\u2581"} and len(p) > 1 else p for p in pieces]

    meta = {
        "general.architecture": "gemma3",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": pieces,
        "tokenizer.ggml.scores": np.zeros(n, np.float32),
        "tokenizer.ggml.token_type": np.array(
            [sentencepiece_token_type(sp, i, GEMMA_SYMBOLS) for i in range(n)], np.int32
        ),
        "tokenizer.ggml.unknown_token_id": sp.unk_id(),
        "tokenizer.ggml.add_space_prefix": False,
    }
    build_tokenizer_files(meta, tmp_path, Path("gemma.gguf"))
    rebuilt = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in SAMPLES:
        expected = sp.encode(text)
        assert rebuilt.encode(text, add_special_tokens=False).ids == expected, text
        assert rebuilt.decode(expected) == sp.decode(expected)


def test_gemma_space_pieces_marked_user_defined_keep_their_ids(
    gemma_like_spm, tmp_path: Path
) -> None:
    """Gemma 3's GGUF marks its pieces of only spaces user-defined: each stays the piece
    of the file (an added token of its own beyond the pieces would be an id past the
    model's embedding), and text with runs of spaces encodes within the file's pieces."""
    sp = gemma_like_spm
    n = sp.get_piece_size()
    pieces = [sp.id_to_piece(i) for i in range(n)]
    spaces = [i for i, p in enumerate(pieces) if p and set(p) == {"\u2581"} and len(p) > 1]
    assert spaces, "the fixture has pieces of several spaces"
    pieces = [" " * len(p) if i in spaces else p for i, p in enumerate(pieces)]
    types = [4 if i in spaces else sentencepiece_token_type(sp, i, GEMMA_SYMBOLS) for i in range(n)]
    meta = {
        "general.architecture": "gemma3",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": pieces,
        "tokenizer.ggml.scores": np.zeros(n, np.float32),
        "tokenizer.ggml.token_type": np.array(types, np.int32),
        "tokenizer.ggml.unknown_token_id": sp.unk_id(),
        "tokenizer.ggml.add_space_prefix": False,
    }
    build_tokenizer_files(meta, tmp_path, Path("gemma.gguf"))
    rebuilt = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert rebuilt.get_vocab_size() == n
    for text in SAMPLES:
        ids = rebuilt.encode(text, add_special_tokens=False).ids
        assert max(ids) < n, text
        assert rebuilt.decode(ids) == text
    two = rebuilt.encode("a  b", add_special_tokens=False).ids
    assert pieces.index("  ") in two  # two spaces: the piece of two spaces, one token
