"""Tokenizers rebuilt from GGUF metadata encode exactly like the originals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf_support import sentencepiece_token_type, train_sentencepiece
from tokenizers import Tokenizer

from engine.errors import ModelLoadError
from engine.library.gguf_tokenizer import build_tokenizer_files

SAMPLES = [
    "Hello world, the engine runs 42 models!",
    "  two leading spaces,\ttabs\nand new lines\n\n",
    "émoji 🦙 and ünïcödé, plus 中文 that falls back to bytes",
    "def generate_reply(loaded, prompt_cache):\n    return 3.14159",
]


@pytest.fixture(scope="module")
def sentencepiece_model(tmp_path_factory: pytest.TempPathFactory):
    """A real SentencePiece BPE model configured like Llama 2's (byte fallback, no
    normalisation, split digits), trained on this repository's own text."""
    repo = Path(__file__).resolve().parents[1]
    text = "\n".join(p.read_text() for p in sorted((repo / "engine").glob("*.py")))
    return train_sentencepiece(tmp_path_factory.mktemp("spm"), text, 800)


def _gguf_meta(sp) -> dict:
    """The metadata llama.cpp's converter writes for a SentencePiece model."""
    n = sp.get_piece_size()
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": [sp.id_to_piece(i) for i in range(n)],
        "tokenizer.ggml.scores": np.array([sp.get_score(i) for i in range(n)], np.float32),
        "tokenizer.ggml.token_type": np.array(
            [sentencepiece_token_type(sp, i) for i in range(n)], np.int32
        ),
        "tokenizer.ggml.unknown_token_id": np.array(sp.unk_id()),
        "tokenizer.ggml.bos_token_id": np.array(sp.bos_id()),
        "tokenizer.ggml.eos_token_id": np.array(sp.eos_id()),
        "tokenizer.ggml.add_bos_token": np.array(True),
        "tokenizer.chat_template": "{% for m in messages %}[INST] {{ m['content'] }} [/INST]"
        "{% endfor %}",
    }


def test_sentencepiece_gguf_tokenizer_matches_sentencepiece(
    sentencepiece_model, tmp_path: Path
) -> None:
    build_tokenizer_files(_gguf_meta(sentencepiece_model), tmp_path, Path("llama2.gguf"))
    rebuilt = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in SAMPLES:
        expected = sentencepiece_model.encode(text)
        assert rebuilt.encode(text, add_special_tokens=False).ids == expected, text
        assert rebuilt.decode(expected) == sentencepiece_model.decode(expected)
    assert "[INST]" in (tmp_path / "tokenizer_config.json").read_text()


def test_byte_level_tokenizer_round_trips(default_model_dir: Path) -> None:
    rebuilt = Tokenizer.from_file(str(default_model_dir / "tokenizer.json"))
    for text in SAMPLES:
        assert rebuilt.decode(rebuilt.encode(text, add_special_tokens=False).ids) == text
    # Special tokens stay single tokens; digits split one by one (SmolLM's pre-tokenizer).
    assert len(rebuilt.encode("<|im_start|>", add_special_tokens=False).ids) == 1
    assert len(rebuilt.encode("12345", add_special_tokens=False).ids) == 5


def test_unknown_tokenizer_kind_names_the_file(tmp_path: Path) -> None:
    meta = {"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": ["a"]}
    with pytest.raises(ModelLoadError, match=r"model\.gguf: tokenizer not supported yet: 't5'"):
        build_tokenizer_files(meta, tmp_path, Path("model.gguf"))
