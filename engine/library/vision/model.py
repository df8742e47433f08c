"""A vision-language model loaded by mlx-vlm and seen by the runtime as a text model.

A folder whose config.json has a `vision_config` is a vision model. `load_vision_model`
loads it through mlx-vlm's `load` (the model and its processor, as mlx-vlm reads any
downloaded model) and hands the engine a `VisionTextModel`: the language model seen the way
the runtime sees every text model (`model(tokens, cache=...)` gives logits, `.layers` gives
the layers the KV cache is made for), holding the whole mlx-vlm model so its memory (vision
tower included) counts in the memory plan. Images reach it as input embeddings computed by
the model's own `get_input_embeddings` (`engine.runtime.vision`); everything after that
(constraints, batching, the prompt cache) is the text path. A family with multi-axis
rotary positions (Qwen-VL) gets its positions from the caller: a prompt's from its
`Positions`, a decoding row's from the cache's offset plus the row's `rope_deltas`.

Prompt positions of an image carry digest-derived ids (`engine.prompt.images`) so the
prompt cache tells pictures apart; every id outside the vocabulary is read as the image
token before it reaches the embedding table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn

from engine.errors import ModelLoadError
from engine.library.vision.families import family_for
from engine.library.vision.family import VisionFamily
from engine.library.vision.phi3 import MODEL_TYPES as PHI3_TYPES
from engine.library.vision.phi3 import phi3_family
from engine.prompt.images import set_image_rewrite, set_image_token, set_image_writer

# Why a language model's cache kind cannot be held (prefixes shared, rows batched, written
# to the disk tier), by the kind mlx-vlm's `make_cache` gives.
_UNCACHEABLE = {
    "ArraysCache": "linear attention layers keeping a recurrent state (Qwen3.5's Gated DeltaNet)",
    "MambaCache": "state-space layers keeping a recurrent state",
    "ChunkedKVCache": "chunked attention layers that forget what lies before each chunk (Llama 4)",
}


def is_vision_folder(folder: Path) -> bool:
    """Whether the model folder holds a vision-language model (its config has a vision tower)."""
    config = folder / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("vision_config"), dict)


@dataclass(frozen=True)
class VisionParts:
    """What the runtime needs to put images into a prompt: the processor (its image
    processor and text expansion), the image token, and the vocabulary size."""

    processor: Any
    image_token: str
    image_token_id: int
    vocab_size: int
    family: VisionFamily


class VisionTextModel(nn.Module):  # type: ignore[misc,name-defined]
    """An mlx-vlm model's language model as the runtime calls any text model."""

    def __init__(self, vlm: Any, parts: VisionParts) -> None:
        super().__init__()
        self.vlm = vlm  # a child module: its parameters (vision tower too) are this model's
        self._parts = parts
        self._multi_axis = type(parts.family).positions is not VisionFamily.positions

    @property
    def parts(self) -> VisionParts:
        return self._parts

    @property
    def layers(self) -> Any:
        return self.vlm.language_model.layers

    @property
    def multi_axis(self) -> bool:
        """Whether positions are given on several axes (Qwen-VL's M-RoPE)."""
        return self._multi_axis

    def make_cache(self) -> list[Any]:
        """mlx-lm's KV caches of the kinds the language model asks for (a sliding-window
        layer gets a rotating cache of its window, as in mlx-vlm's own generate)."""
        from mlx_lm.models import cache as mlx_cache

        make = getattr(self.vlm.language_model, "make_cache", None)
        wanted: list[Any] = make() if callable(make) else [None] * len(self.layers)
        out: list[Any] = []
        for layer in wanted:
            kind = type(layer).__name__
            if kind == "RotatingKVCache":
                rotating = mlx_cache.RotatingKVCache(max_size=layer.max_size, keep=layer.keep)  # type: ignore[no-untyped-call]
                out.append(rotating)
            elif layer is None or kind == "KVCache":
                out.append(mlx_cache.KVCache())  # type: ignore[no-untyped-call]
            else:  # a kind Corral does not batch or store (recurrent state): refuse clearly
                why = _UNCACHEABLE.get(kind, "a state that is not a key/value cache")
                raise ModelLoadError(
                    f"this vision model's language model has {why} ({kind}), which Corral's "
                    "prompt cache and batching cannot hold yet"
                )
        return out

    def image_tokens(self, inputs: mx.array) -> mx.array:
        """`inputs` with the digest-derived ids of image positions (the prompt cache's
        keys) read as the image token."""
        parts = self._parts
        if parts.image_token_id < 0:  # Phi-3.5-vision's negative ids: the prompt is unsigned
            inputs = inputs.astype(mx.int32)
        return mx.where(inputs >= parts.vocab_size, parts.image_token_id, inputs)

    def __call__(
        self,
        inputs: mx.array,
        cache: Any = None,
        input_embeddings: mx.array | None = None,
        position_ids: mx.array | None = None,
        rope_deltas: mx.array | None = None,
        **layer_inputs: Any,
    ) -> mx.array:
        """Logits of `inputs`; `position_ids` (axes, rows, tokens) where a prompt's images
        moved them, else a multi-axis model continues at the cache's offset plus each
        row's `rope_deltas` (0 where None); `layer_inputs`: what the family feeds inside
        the layers for a chunk of a prompt (Qwen3-VL's deepstack features)."""
        inputs = self.image_tokens(inputs)
        if position_ids is None and self._multi_axis:
            position_ids = _continued_positions(inputs, cache, rope_deltas)
        kwargs = dict(layer_inputs)
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        out = self.vlm.language_model(inputs, inputs_embeds=input_embeddings, cache=cache, **kwargs)
        logits: mx.array = getattr(out, "logits", out)
        return logits

    def input_embeddings(
        self, tokens: mx.array, pixel_values: mx.array, extras: dict[str, Any] | None = None
    ) -> mx.array:
        """The prompt's embeddings with the images' features in place, by the model's own
        input embedding path (vision tower, projector, merge); `extras` are the
        processor's other outputs (Qwen's `image_grid_thw`)."""
        return self.input_features(tokens, pixel_values, extras)[0]

    def input_features(
        self, tokens: mx.array, pixel_values: mx.array, extras: dict[str, Any] | None = None
    ) -> tuple[mx.array, dict[str, Any]]:
        """The prompt's input embeddings and the model's other outputs for it (mlx-vlm's
        `InputEmbeddingsFeatures`: Qwen3-VL's deepstack features and their positions)."""
        tokens = self.image_tokens(tokens)
        # the prompt's attention mask, as mlx-vlm's generate passes it (one row, no padding)
        mask = mx.ones(tokens.shape, dtype=mx.int32)
        features = self.vlm.get_input_embeddings(tokens, pixel_values, mask=mask, **(extras or {}))
        embeds: mx.array = getattr(features, "inputs_embeds", features)
        to_dict = getattr(features, "to_dict", None)
        others = to_dict() if callable(to_dict) else {}
        return embeds, {k: v for k, v in others.items() if k != "inputs_embeds" and v is not None}


def load_vision_model(target: Path) -> tuple[VisionTextModel, Any]:
    """Load the vision model in `target` with mlx-vlm; returns the model and an mlx-lm
    tokenizer (the one every other layer reads tokens through) that knows the image token."""
    from mlx_lm.utils import load_tokenizer
    from mlx_vlm.utils import load as vlm_load

    try:
        vlm, processor = vlm_load(str(target))
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{target}: {exc}") from exc
    except Exception as exc:
        raise ModelLoadError(f"{target}: could not load vision model: {exc}") from exc
    config = getattr(vlm, "config", None)
    model_type = str(getattr(config, "model_type", ""))
    eos = getattr(config, "eos_token_id", None)
    tokenizer = load_tokenizer(target, eos_token_ids=eos)  # type: ignore[no-untyped-call]
    image_id: Any
    image_token: Any
    if model_type in PHI3_TYPES:  # numbered markers: the image token is the tokenizer's
        family: VisionFamily = phi3_family(model_type, processor, tokenizer)
        image_id, image_token = family.image_token_id, family.marker
    else:
        image_id = getattr(config, "image_token_index", None) or getattr(
            config, "image_token_id", None
        )
        image_token = getattr(processor, "image_token", None)
        if image_id is None or not isinstance(image_token, str):
            raise ModelLoadError(
                f"{target}: Corral cannot find this vision model's image token "
                f"(model type {model_type or '?'!r})"
            )
        family = family_for(model_type, vlm, processor, int(image_id))
    text_config = getattr(config, "text_config", None)
    vocab = int(getattr(text_config, "vocab_size", 0) or getattr(config, "vocab_size", 0))
    set_image_token(tokenizer, family.marker)
    template = getattr(tokenizer, "chat_template", None)
    set_image_writer(
        tokenizer,
        lambda role, text, images: family.message(
            role, text, images, template if isinstance(template, str) else None
        ),
    )
    set_image_rewrite(tokenizer, family.rewrite)
    parts = VisionParts(
        processor, image_token, int(image_id), max(vocab, int(image_id) + 1), family
    )
    model = VisionTextModel(vlm, parts)
    try:
        model.make_cache()  # a state Corral cannot cache is refused now, not at the first reply
    except ModelLoadError as exc:
        raise ModelLoadError(f"{target}: {exc}") from None
    return model, tokenizer


def vision_parts(model: Any) -> VisionParts | None:
    """The vision parts of a loaded model, or None for a text model."""
    return model.parts if isinstance(model, VisionTextModel) else None


def _continued_positions(inputs: mx.array, cache: Any, deltas: mx.array | None) -> mx.array:
    """Positions (3, rows, tokens) of `inputs` fed after what `cache` holds: each row's
    offset (mlx-lm's batch caches keep one per row) plus its delta, on every axis."""
    rows, length = inputs.shape
    offset = getattr(cache[0], "offset", 0) if cache else 0
    start = (
        mx.array(offset).reshape(-1, 1)
        if isinstance(offset, mx.array)
        else mx.array([[int(offset)]])
    )
    if deltas is not None:
        start = start + deltas.reshape(-1, 1)
    ids = mx.broadcast_to(start + mx.arange(length)[None], (rows, length))
    return mx.broadcast_to(ids[None], (3, rows, length))
