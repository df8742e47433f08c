"""mlx-embeddings called directly, as its own README does: the reference Corral's vectors
and relevance scores are checked against (tests and the serving bench).

Each input runs alone (no padding) through the library's `load`ed model and tokenizer, so
the reference shares nothing with how Corral batches; `library_batch` runs a batch in one
call the way the library's `generate` does (for timing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np


def load_library(folder: str | Path) -> tuple[Any, Any]:
    """The library's own model and tokenizer for `folder`."""
    from mlx_embeddings.utils import load

    return load(str(folder))  # type: ignore[no-any-return]


def library_vectors(folder: str | Path, texts: list[str], loaded: Any = None) -> np.ndarray:
    """Each text's `text_embeds`, computed alone by the library: (texts, dimensions)."""
    model, tokenizer = loaded or load_library(folder)
    out = []
    for text in texts:
        enc = tokenizer([text], return_tensors="mlx")
        embeds = model(enc["input_ids"], attention_mask=enc["attention_mask"]).text_embeds
        out.append(np.array(embeds.astype(mx.float32))[0])
    return np.stack(out)


def library_batch(loaded: Any, texts: list[str]) -> np.ndarray:
    """The texts' `text_embeds` in one padded forward pass, as the library's `generate`
    computes them."""
    model, tokenizer = loaded
    enc = tokenizer(texts, padding=True, return_tensors="mlx")
    embeds = model(enc["input_ids"], attention_mask=enc["attention_mask"]).text_embeds
    mx.eval(embeds)
    return np.array(embeds.astype(mx.float32))


def library_scores(
    folder: str | Path, query: str, documents: list[str], loaded: Any = None
) -> list[float]:
    """Each (query, document) pair's score from the library's cross-encoder head
    (`pooler_output`, a sigmoid over its one label), computed alone."""
    model, tokenizer = loaded or load_library(folder)
    out = []
    for document in documents:
        enc = tokenizer([query], [document], return_tensors="mlx")
        scores = model(enc["input_ids"], attention_mask=enc["attention_mask"]).pooler_output
        out.append(float(scores[0, 0].item()))
    return out
