"""Vision models on the engine: images with constraints, reuse of an image's prefix, bad
images refused with their reason, and text-only models refusing images clearly."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from engine.types import ChatRequest, ConstraintSpec, ImageInput, SamplingSettings
from tests.vision_support import BAD_IMAGES, animated_gif, png

RECEIPT = {
    "type": "object",
    "properties": {
        "shop": {"type": "string", "maxLength": 12},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["shop", "total", "paid"],
    "additionalProperties": False,
}


def ask(eng: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    settings = SamplingSettings(max_tokens=kwargs.pop("max_tokens", 24), temperature=0)
    return eng.submit(ChatRequest(messages, settings, **kwargs)).result()


def with_image(text: str, data: bytes, name: str = "photo.png") -> dict[str, Any]:
    return {"role": "user", "content": text, "images": [ImageInput(data, name)]}


def test_model_reads_images_and_counts_its_vision_tower(
    vision_engine: Any, vision_model_dir: Any
) -> None:
    import mlx.core as mx

    info = vision_engine.snapshot.model
    assert info.vision is True
    weights = mx.load(str(vision_model_dir / "model.safetensors"))
    language = sum(v.nbytes for k, v in weights.items() if k.startswith("language_model."))
    everything = sum(v.nbytes for v in weights.values())
    assert language < everything  # the folder has a vision tower and a projector
    assert info.weights_bytes == everything  # the memory plan counts them too
    assert vision_engine.snapshot.memory.model_bytes >= everything


def test_image_with_json_schema_gives_valid_json(vision_engine: Any) -> None:
    spec = ConstraintSpec("json_schema", json.dumps(RECEIPT), name="receipt")
    result = ask(
        vision_engine, [with_image("Extract this receipt.", png())], constraint=spec, max_tokens=60
    )
    assert result.error is None
    jsonschema.validate(json.loads(result.text), RECEIPT)
    assert result.as_written is not None and result.as_written.valid


def test_follow_up_about_the_same_image_reuses_its_prefix(vision_engine: Any) -> None:
    picture = png((80, 60), (10, 120, 240))
    first_turn = [with_image("What is in this picture?", picture)]
    first = ask(vision_engine, first_turn)
    image_tokens = 64  # (112 / 14)² patches of the tiny model
    # at most the template's system prompt was cached before: not the new picture
    assert first.error is None
    assert first.stats.cached_tokens < first.stats.prompt_tokens - image_tokens
    follow_up = first_turn + [
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "What colour is it?"},
    ]
    second = ask(vision_engine, follow_up)
    assert second.error is None
    assert second.stats.cached_tokens >= first.stats.prompt_tokens - 1  # the image included
    # a different picture in the same place is not mistaken for the cached one
    other = ask(vision_engine, [with_image("What is in this picture?", png((80, 60)))])
    assert other.stats.cached_tokens < first.stats.prompt_tokens - image_tokens


def test_same_image_gives_same_reply_and_different_images_differ(vision_engine: Any) -> None:
    red, blue = png(color=(255, 0, 0)), png(color=(0, 0, 255))
    a = ask(vision_engine, [with_image("Describe.", red)], max_tokens=12)
    b = ask(vision_engine, [with_image("Describe.", red)], max_tokens=12)
    c = ask(vision_engine, [with_image("Describe.", blue)], max_tokens=12)
    assert a.text == b.text
    assert a.token_ids[-12:] != c.token_ids[-12:] or a.text != c.text


def test_text_only_request_to_a_vision_model(vision_engine: Any) -> None:
    result = ask(vision_engine, [{"role": "user", "content": "Hello there"}], max_tokens=6)
    assert result.error is None and result.stats.generated_tokens > 0


def test_regex_constraint_and_batched_image_rows(vision_engine: Any) -> None:
    spec = ConstraintSpec("regex", r"(yes|no) [0-9]{1,3}")
    requests = [
        ChatRequest(
            [with_image(f"Question {i}?", png(color=(i * 60, 90, 30)))],
            SamplingSettings(max_tokens=10, temperature=0),
            constraint=spec,
        )
        for i in range(3)
    ]
    results = [h.result() for h in vision_engine.submit_many(requests)]
    for result in results:
        assert result.error is None
        assert result.text.split(" ")[0] in ("yes", "no")
    alone = ask(vision_engine, requests[1].messages, constraint=spec, max_tokens=10)
    assert alone.text == results[1].text  # a row decodes the same beside others


def test_animated_image_reads_its_first_frame_and_says_so(vision_engine: Any) -> None:
    result = ask(vision_engine, [with_image("What is this?", animated_gif(), "anim.gif")])
    assert result.error is None
    assert any(
        "anim.gif is animated (3 frames): only its first frame" in w for w in result.warnings
    )


@pytest.mark.parametrize("kind", sorted(BAD_IMAGES))
def test_bad_image_is_refused_with_its_reason(vision_engine: Any, kind: str) -> None:
    data, words = BAD_IMAGES[kind]
    result = ask(vision_engine, [with_image("Look", data, f"{kind}.png")])
    assert result.error is not None and result.error_kind == "input"
    assert f"{kind}.png" in result.error
    for word in words:
        assert word in result.error
    assert result.text == ""


def test_text_only_model_refuses_images_clearly(tiny_engine: Any) -> None:
    result = ask(tiny_engine, [with_image("What is this?", png())])
    assert result.error_kind == "input"
    assert "does not read images" in (result.error or "")
