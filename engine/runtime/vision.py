"""A prompt with images: its tokens, the prompt cache's key for them, and their embeddings.

The chat template leaves one image marker per attached image, where the model's family
places it (`engine.prompt.images`). `VisionPrompt.build` asks the model's own processor,
through its family (`engine.library.vision`), how each image is written into the prompt
(LLaVA repeats the image token once per patch; Qwen-VL once per merged patch, with the
image's grid), what its pixel values are and, for families with multi-axis rotary
positions, every position of the prompt; it puts digest-derived ids on the image's
positions, so the prompt cache keys them by the picture
(`engine.prompt.images.image_key_ids`). The positions are recomputed from each request (its
tokens and its images' grids), so a prefix taken from the cache, whatever it holds, is
continued at the right positions. Prefill asks `embeddings(start, end)` for
each chunk: a chunk that holds image positions gets the prompt's input embeddings computed
by the model's own path (vision tower, projector, merge) once; a chunk without any (the
text after a cached image, a follow-up question) is plain text, so an image whose prefix is
cached is never encoded again. Decoding is the text runtime's, unchanged.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mlx.core as mx

from engine.library.vision import (
    Expansion,
    ImageProcessorError,
    VisionParts,
    VisionTextModel,
    vision_parts,
)
from engine.prompt.images import BadImageError, CheckedImage, check_image, message_images
from engine.prompt.images import image_key_ids as _key_ids
from engine.types import ChatRequest

if TYPE_CHECKING:
    from engine.library.load import LoadedModel


def request_images(loaded: LoadedModel, request: ChatRequest) -> list[CheckedImage]:
    """The request's images, decoded and checked (BadImageError says which is wrong), or a
    clear refusal when the model reads no images."""
    images = message_images(request.messages)
    if not images:
        return []
    if vision_parts(loaded.model) is None:
        raise BadImageError(
            f"{loaded.info.name} does not read images: the request has {len(images)} "
            "image(s); load a vision model (one whose config has a vision_config) for them"
        )
    if request.raw_prompt is not None:
        raise BadImageError("images need the chat template: a raw prompt cannot carry them")
    return [check_image(img.data, img.name or f"image {i + 1}") for i, img in enumerate(images)]


class VisionPrompt:
    """The image part of one reply's prompt (engine thread)."""

    def __init__(
        self,
        model: VisionTextModel,
        tokens: list[int],
        images: list[Expansion],
        positions: list[int],
        notes: list[str],
    ) -> None:
        self.model = model
        self.tokens = tokens  # the prompt, image positions holding digest-derived ids
        family = model.parts.family
        pixel_values, self._extras = family.combine(images)
        self.pixel_values: mx.array | None = pixel_values
        self.positions = positions  # prompt positions whose embeddings are image features
        self.notes = notes
        self.encode_s = 0.0  # time spent computing the image embeddings (0: reused)
        self._embeds: mx.array | None = None
        self._features: dict[str, Any] = {}  # the model's other input features (deepstack)
        # multi-axis rotary positions of the whole prompt (None: 0, 1, 2, ...) and the
        # offset its images introduced, which decoding continues with
        rope = family.positions(model.vlm, model.image_tokens(mx.array(tokens)[None]), self._extras)
        self._rope_ids = rope.ids if rope is not None else None
        self.rope_delta = rope.delta if rope is not None else 0

    @classmethod
    def build(
        cls, loaded: LoadedModel, tokens: Sequence[int], images: list[CheckedImage]
    ) -> VisionPrompt:
        parts = vision_parts(loaded.model)
        assert parts is not None and isinstance(loaded.model, VisionTextModel)
        marker = parts.family.marker_id
        where = [i for i, t in enumerate(tokens) if t == marker]
        if len(where) != len(images):
            raise BadImageError(
                f"the prompt has {len(where)} image marker(s) for {len(images)} image(s): the "
                f"text may not contain the image marker {parts.family.marker!r}"
            )
        out: list[int] = []
        positions: list[int] = []
        expanded: list[Expansion] = []
        start = 0
        for at, image in zip(where, images, strict=True):
            out.extend(tokens[start:at])
            expansion = _expand(parts, image)
            ids = expansion.ids
            keys = iter(_key_ids(image.digest, ids.count(parts.image_token_id), parts.vocab_size))
            for token in ids:
                if token == parts.image_token_id:
                    positions.append(len(out))
                    out.append(next(keys))
                else:
                    out.append(token)
            expanded.append(expansion)
            start = at + 1
        out.extend(tokens[start:])
        notes = [image.note for image in images if image.note]
        return cls(loaded.model, out, expanded, positions, notes)

    def position_ids(self, start: int, end: int) -> mx.array | None:
        """Rotary positions (axes, 1, tokens) of prompt positions [start, end) for a
        multi-axis family; None: the cache's offset says them."""
        return None if self._rope_ids is None else self._rope_ids[:, :, start:end]

    def inputs(self, start: int, end: int) -> dict[str, Any]:
        """What the model is given besides the tokens for prompt positions [start, end):
        their positions (multi-axis families), and where an image is among them their
        input embeddings and whatever the family feeds inside the layers."""
        found: dict[str, Any] = {}
        if (positions := self.position_ids(start, end)) is not None:
            found["position_ids"] = positions
        if any(start <= p < end for p in self.positions):
            self._encode()
            found |= self.model.parts.family.layer_inputs(self._features, start, end)
        if (embeds := self.embeddings(start, end)) is not None:
            found["input_embeddings"] = embeds
        return found

    def embeddings(self, start: int, end: int) -> mx.array | None:
        """Input embeddings of prompt positions [start, end), or None when none of them is
        an image's (the tokens alone then say everything)."""
        if not any(start <= p < end for p in self.positions):
            return None
        self._encode()
        assert self._embeds is not None
        part = self._embeds[:, start:end]
        if end > self.positions[-1]:  # no image position is left: free the prompt's copy
            self._embeds = self.pixel_values = None
            self._features = {}
        return part

    def _encode(self) -> None:
        """The prompt's input embeddings, computed once (vision tower, projector, merge)."""
        if self._embeds is not None:
            return
        assert self.pixel_values is not None
        began = time.perf_counter()
        embeds, features = self.model.input_features(
            mx.array(self.tokens)[None], self.pixel_values, self._extras
        )
        mx.eval(embeds, *[v for v in features.values() if isinstance(v, mx.array)])
        self.encode_s += time.perf_counter() - began
        self._embeds, self._features = embeds, features


# The processor's output for the last few images (engine thread only): a follow-up about
# the same picture skips the processor too, not only the vision tower.
_EXPANDED: OrderedDict[tuple[int, bytes], Expansion] = OrderedDict()
_EXPANDED_KEPT = 8


def _expand(parts: VisionParts, image: CheckedImage) -> Expansion:
    """How the processor writes one image into a prompt, and its pixel values."""
    key = (id(parts), image.digest)
    if (found := _EXPANDED.get(key)) is not None:
        _EXPANDED.move_to_end(key)
        return found
    try:
        found = parts.family.expand(parts.processor, image.image)
    except ImageProcessorError as exc:
        raise BadImageError(str(exc)) from exc
    _EXPANDED[key] = found
    while len(_EXPANDED) > _EXPANDED_KEPT:
        _EXPANDED.popitem(last=False)
    return found
