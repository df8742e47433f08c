"""mlx-embeddings' models at work: loaded with the library's own loader, then token ids in,
vectors or relevance scores out, many inputs per forward pass (padded, with the attention
mask the library's classes read).

Everything here runs on the model's own thread (`engine.embeddings.model`): MLX streams
belong to the thread that made them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from engine.embeddings.batching import plan_batches
from engine.embeddings.families import Family, Kind, family_of, position_limit, rerank_head
from engine.embeddings.pooling import PoolingConfig, read_pooling
from engine.errors import EmbeddingInputError, ModelLoadError

# A tokenizer's model_max_length at or above this is HF's "no limit" placeholder.
_NO_LIMIT = 1_000_000


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"{path / 'config.json'}: cannot read it: {exc}") from None
    if not isinstance(config, dict):
        raise ModelLoadError(f"{path / 'config.json'}: expected a JSON object")
    return config


def _special_affixes(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after a text's own tokens (BERT's
    [CLS] and [SEP], Qwen3-Embedding's end-of-text), found by tokenizing a probe text with
    and without them."""
    probe = "a b c"
    bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(probe)["input_ids"])
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    return [], []


class Runner:
    """One embedding or reranker model and its tokenizer, loaded from `path`."""

    def __init__(self, path: Path, kind: Kind) -> None:
        from mlx_embeddings.utils import load

        from engine.memory.plan import model_nbytes

        config = _read_config(path)
        self.family: Family = family_of(config, kind, str(path))
        self.kind = kind
        self.head = rerank_head(config)
        self.pooling: PoolingConfig = read_pooling(path)
        self._check_pooling(path)
        try:
            self.model, wrapper = load(str(path))
        except Exception as exc:  # the library raises whatever its loading met
            raise ModelLoadError(f"{path}: mlx-embeddings could not load it: {exc}") from exc
        # The transformers tokenizer inside the library's wrapper (settings made on the
        # wrapper would not reach it).
        self.tokenizer = getattr(wrapper, "_tokenizer", wrapper)
        if self.tokenizer.pad_token_id is None:  # decoder tokenizers may have none
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # Padding on the right for every family: mlx-embeddings' causal Qwen3 gives NaN
        # vectors for a batch padded on the left (a padding row attends to nothing), and
        # its last-token pooling finds each input's end either way.
        self.tokenizer.padding_side = "right"
        self.vocab_size = int(config.get("vocab_size") or len(self.tokenizer))
        limits = [position_limit(self.family, config)]
        declared = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(declared, int) and 0 < declared < _NO_LIMIT:
            limits.append(declared)
        self.max_tokens = min([n for n in limits if n] or [8192])
        self.prefix, self.suffix = _special_affixes(self.tokenizer)
        if kind == "rerank" and getattr(self.model.config, "num_labels", 1) != 1:
            raise ModelLoadError(
                f"{path}: a reranker with {self.model.config.num_labels} labels; Corral "
                "serves cross-encoders that give one relevance score"
            )
        self.weights_bytes = model_nbytes(self.model)
        self.dimensions = 0 if kind == "rerank" else int(self.embed([self.prefix + [0]]).shape[1])

    def _check_pooling(self, path: Path) -> None:
        family, pooling = self.family, self.pooling
        if family.hidden == "library":
            if pooling.pooling not in (None, family.pooling):
                raise ModelLoadError(
                    f"{path}: pools by {pooling.pooling}, but mlx-embeddings' {family.label} "
                    f"pools by {family.pooling} (and projects after it)"
                )
        elif pooling.dense:
            raise ModelLoadError(
                f"{path}: Dense layers after pooling are not supported for {family.label}"
            )

    # ---- inputs ----

    def text_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's tokens with the model's special tokens, as the library tokenizes."""
        # verbose=False: a text too long is refused by check_length, not warned of
        encoded = self.tokenizer(list(texts), verbose=False)
        return [list(ids) for ids in encoded["input_ids"]]

    def array_ids(self, tokens: Sequence[int], index: int) -> list[int]:
        """A token array as the text it spells would be: between the model's special
        tokens. EmbeddingInputError for an id outside the vocabulary."""
        for token in tokens:
            if not 0 <= token < self.vocab_size:
                raise EmbeddingInputError(
                    f"token id {token} is outside the model's vocabulary "
                    f"(0 to {self.vocab_size - 1})",
                    index,
                )
        return [*self.prefix, *tokens, *self.suffix]

    def check_length(self, ids: list[int], index: int | None, what: str = "input") -> None:
        if len(ids) > self.max_tokens:
            raise EmbeddingInputError(
                f"this {what} is {len(ids)} tokens; the model reads at most "
                f"{self.max_tokens}: split it into shorter pieces",
                index,
            )

    # ---- forward passes ----

    def _padded(self, rows: list[dict[str, list[int]]]) -> dict[str, mx.array]:
        padded = self.tokenizer.pad(
            {key: [row[key] for row in rows] for key in rows[0]},
            padding=True,
            return_tensors="np",
        )
        return {key: mx.array(value) for key, value in padded.items()}

    def embed(self, ids: list[list[int]]) -> np.ndarray:
        """The vectors of inputs given as token ids, in their order: (n, dimensions)."""
        out: list[np.ndarray] = [np.empty(0, np.float32)] * len(ids)
        for batch in plan_batches([len(x) for x in ids]):
            inputs = self._padded([{"input_ids": ids[i]} for i in batch])
            vectors = self._vectors(inputs["input_ids"], inputs["attention_mask"])
            mx.eval(vectors)
            array = np.array(vectors.astype(mx.float32), copy=False)
            for row, i in enumerate(batch):
                out[i] = array[row]
        return np.stack(out) if out else np.zeros((0, self.dimensions), np.float32)

    def _vectors(self, input_ids: mx.array, mask: mx.array) -> mx.array:
        from mlx_embeddings.models.base import mean_pooling, normalize_embeddings
        from mlx_embeddings.models.qwen3 import last_token_pool

        family, model = self.family, self.model
        if family.hidden == "library":
            return model(input_ids, attention_mask=mask).text_embeds  # type: ignore[no-any-return]
        if family.hidden == "encoder":
            hidden = model.model(input_ids, attention_mask=mask)["last_hidden_state"]
        else:
            hidden = model(input_ids, attention_mask=mask).last_hidden_state
        pooling = self.pooling.pooling or family.pooling
        if pooling == "cls":
            pooled = hidden[:, 0]
        elif pooling == "last":
            pooled = last_token_pool(hidden, mask)
        else:
            pooled = mean_pooling(hidden, mask)
        return normalize_embeddings(pooled) if self.pooling.normalize else pooled  # type: ignore[no-any-return]

    def pair_ids(self, query: str, documents: Sequence[str]) -> list[dict[str, list[int]]]:
        """(query, document) pairs as the cross-encoder reads them, documents cut to fit;
        EmbeddingInputError where the query alone does not fit."""
        alone = self.tokenizer(query, "", verbose=False)[
            "input_ids"
        ]  # the query and the pair's specials
        self.check_length(list(alone), None, "query")
        encoded = self.tokenizer(
            [query] * len(documents),
            list(documents),
            truncation="only_second",
            max_length=self.max_tokens,
        )
        return [
            {key: list(encoded[key][i]) for key in encoded if key != "attention_mask"}
            for i in range(len(documents))
        ]

    def scores(self, rows: list[dict[str, list[int]]]) -> np.ndarray:
        """Each pair's relevance, between 0 and 1: the head's probability."""
        out = np.zeros(len(rows), np.float32)
        for batch in plan_batches([len(r["input_ids"]) for r in rows]):
            inputs = self._padded([rows[i] for i in batch])
            probs = self.model(inputs["input_ids"], attention_mask=inputs["attention_mask"])
            logits = probs.pooler_output[:, 0]
            if getattr(self.model, "is_regression", False):  # raw logits: made a probability
                logits = mx.sigmoid(logits)
            mx.eval(logits)
            for row, i in enumerate(batch):
                out[i] = float(logits[row].item())
        return out
