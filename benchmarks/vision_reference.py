"""mlx-vlm's own reading of a conversation with pictures: the reference Corral must equal.

`Turn` is a message in a neutral form (role, text, pictures). `corral_messages` writes a
conversation as Corral's requests carry it; `reference` runs mlx-vlm's own prompt
utilities (`apply_chat_template`, `prepare_inputs`) and its `generate`, greedy, on the same
model folder, and returns the prompt's token ids and the reply's.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.types import ImageInput


@dataclass(frozen=True)
class Turn:
    """One message: its role, its text and the pictures (encoded image files) it holds."""

    role: str
    text: str
    images: tuple[bytes, ...] = field(default_factory=tuple)


def corral_messages(turns: list[Turn]) -> list[dict[str, Any]]:
    """The conversation as a Corral ChatRequest's messages."""
    out: list[dict[str, Any]] = []
    for i, turn in enumerate(turns):
        message: dict[str, Any] = {"role": turn.role, "content": turn.text}
        if turn.images:
            message["images"] = [
                ImageInput(data, f"picture-{i}-{j}.png") for j, data in enumerate(turn.images)
            ]
        out.append(message)
    return out


@dataclass(frozen=True)
class Reference:
    """mlx-vlm's prompt ids and greedy reply ids (its end token left out)."""

    prompt_ids: list[int]
    reply_ids: list[int]


_LOADED: dict[str, tuple[Any, Any]] = {}


def load_reference(folder: Path) -> tuple[Any, Any]:
    """mlx-vlm's model and processor for `folder` (loaded once per process)."""
    from mlx_vlm import load

    key = str(folder)
    if key not in _LOADED:
        _LOADED[key] = load(key)
    return _LOADED[key]


def reference(
    folder: Path, turns: list[Turn], max_tokens: int, **template_kwargs: Any
) -> Reference:
    """mlx-vlm's greedy reply to `turns` on the model in `folder`; `template_kwargs` go to
    the chat template (`enable_thinking=True`)."""
    from mlx_vlm import generate
    from mlx_vlm.prompt_utils import apply_chat_template, get_message_json
    from mlx_vlm.utils import prepare_inputs
    from PIL import Image

    model, processor = load_reference(folder)
    config = model.config
    pictures = [Image.open(io.BytesIO(d)).convert("RGB") for t in turns for d in t.images]
    if len(turns) == 1 and turns[0].role == "user":
        prompt_in: Any = turns[0].text  # mlx-vlm places the pictures itself
    else:  # each message's pictures where mlx-vlm's formatter puts them in that message
        prompt_in = [_placed(config.model_type, t, get_message_json) for t in turns]
    prompt: Any  # mlx-vlm's formatter returns text or messages by its arguments
    if config.model_type == "gemma4" and not isinstance(prompt_in, str):
        prompt = _gemma4_prompt(processor, config, prompt_in, len(pictures), template_kwargs)
    else:
        prompt = apply_chat_template(
            processor, config, prompt_in, num_images=len(pictures), **template_kwargs
        )
    given: dict[str, Any] = {}
    if config.model_type == "phi3_v" and pictures:
        prompt, given = _phi3_inputs(processor, prompt, pictures)
    inputs = given or prepare_inputs(processor, images=pictures or None, prompts=prompt)
    prompt_ids = [int(t) for t in inputs["input_ids"][0].tolist()]
    images: Any = pictures or None  # mlx-vlm's annotation says paths; it takes images too
    out = generate(
        model,
        processor,
        prompt,
        image=images,
        max_tokens=max_tokens,
        temperature=0.0,
        verbose=False,
        **given,
    )
    ids = [int(t) for t in out.token_ids or []]
    ends = set(_ends(config))
    while ids and ids[-1] in ends:
        ids.pop()
    return Reference(prompt_ids, ids)


def _gemma4_prompt(
    processor: Any, config: Any, turns: list[Any], images: int, kwargs: dict[str, Any]
) -> str:
    """Gemma 4's prompt by mlx-vlm's formatter and the template, with one slip of mlx-vlm
    0.7.10 mended: it gives a system message as a list of text parts (its formatter does,
    and the processor's template call makes every text content such a list), which Gemma
    4's template writes out as the list's Python text; the system text is given as text,
    through the tokenizer's template call."""
    from mlx_vlm.prompt_utils import apply_chat_template, get_chat_template

    messages: Any = apply_chat_template(
        processor, config, turns, num_images=images, return_messages=True, **kwargs
    )
    for message in messages:
        content = message.get("content")
        if message.get("role") == "system" and isinstance(content, list):
            message["content"] = "".join(str(part.get("text", "")) for part in content)
    return str(get_chat_template(processor.tokenizer, messages, True, **kwargs))


def _phi3_inputs(processor: Any, prompt: str, pictures: list[Any]) -> tuple[str, dict[str, Any]]:
    """Phi-3.5-vision's prompt inputs from its processor, with two slips of mlx-vlm 0.7.10
    mended: its formatter numbers each message's pictures from 1, which its processor
    refuses for pictures in two messages (numbered here through the prompt, as Phi-3.5's
    own processor wants them); and its processor drops the first token of the text after
    each picture, meant to drop a BOS that its tokenizer call (`add_special_tokens=False`)
    never adds: the user's first word (the tokenizer view below adds that BOS, so the
    processor drops what it means to). The pictures' runs are the processor's own."""
    import re

    from mlx_vlm.utils import prepare_inputs

    count = iter(range(1, len(pictures) + 1))
    prompt = re.sub(r"<\|image_\d+\|>", lambda _: f"<|image_{next(count)}|>", prompt)
    own = processor.tokenizer
    processor.tokenizer = _BosOnEveryPiece(own)
    try:
        inputs = prepare_inputs(processor, images=pictures, prompts=prompt)
    finally:
        processor.tokenizer = own
    given = {
        "input_ids": inputs["input_ids"],
        "pixel_values": inputs["pixel_values"],
        "mask": inputs["attention_mask"],
        "image_sizes": inputs["image_sizes"],
    }
    return prompt, given


class _BosOnEveryPiece:
    """A tokenizer whose encode without special tokens still starts with the BOS."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = list(self._tokenizer.encode(text, add_special_tokens=add_special_tokens))
        return ids if add_special_tokens else [self._tokenizer.bos_token_id, *ids]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


def _placed(model_type: str, turn: Turn, get_message_json: Any) -> dict[str, Any]:
    """`turn` with its pictures as explicit content parts, where mlx-vlm's formatter places
    them for `model_type` (it gives pictures without parts to the last user message only)."""
    if not turn.images:
        return {"role": turn.role, "content": turn.text}
    built = get_message_json(model_type, turn.text, turn.role, num_images=len(turn.images))
    if not isinstance(built["content"], str):
        return dict(built)
    text = [{"type": "text", "text": turn.text}]
    images = [{"type": "image"}] * len(turn.images)
    parts = text + images if built["content"].startswith(turn.text) else images + text
    return {"role": turn.role, "content": parts}


def _ends(config: Any) -> list[int]:
    eos = getattr(config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(e) for e in eos] if isinstance(eos, list) else [int(eos)]
