"""Each vision family's pictures read as mlx-vlm reads them: Corral's greedy reply equals
mlx-vlm's own `generate` on the same tiny model, prompt and picture, alone and in a batch,
with the picture's prefix cached and not, when a chunk of the prompt splits the picture,
with two pictures in one message, after a second picture later in the chat, and from the
disk tier after a restart; schema replies validate (batched as alone), tool calls beside a
picture parse, and bad images are refused with their reason, in every family."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from benchmarks.tiny_vision_families import FAMILIES, REFUSED
from benchmarks.vision_reference import Turn, corral_messages, reference
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings
from tests.test_vision import RECEIPT
from tests.vision_support import BAD_IMAGES, picture

RED, BLUE, GREEN = picture((200, 30, 30)), picture((10, 120, 240)), picture((20, 160, 40), (70, 90))
QUESTION = "What is in this picture?"
TOKENS = 10


@dataclass(frozen=True)
class Family:
    name: str
    folder: Path
    engine: Any

    def __iter__(self) -> Iterator[Any]:  # folder, engine = family
        return iter((self.folder, self.engine))


# Families whose language model keeps sliding-window layers (rotating KV caches), which the
# disk tier does not write (as for text models with them): they restart without a disk hit.
SLIDING_WINDOW = {"gemma3", "gemma4"}
# Families whose vision tower gives a picture slightly different features (about 5e-6)
# when it reads it in one batch with another picture, as mlx-vlm reads a prompt's
# pictures: a tiny random model's near-tied logits can turn that into another token.
BATCH_SENSITIVE = {"gemma3"}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest, vision_family_dir: Any) -> Iterator[Family]:
    """The family's tiny model folder and an engine serving it."""
    from engine.engine import Engine

    folder = vision_family_dir(request.param)
    eng = Engine()
    eng.load_model(str(folder)).result()
    yield Family(request.param, folder, eng)
    eng.close()


def request(turns: list[Turn], max_tokens: int = TOKENS, **kwargs: Any) -> ChatRequest:
    # thinking off, as mlx-vlm renders a template that switches it (Gemma 4's)
    settings = SamplingSettings(max_tokens=max_tokens, temperature=0, think=False)
    return ChatRequest(corral_messages(turns), settings, **kwargs)


def reply_ids(result: Any) -> list[int]:
    assert result.error is None, result.error
    return list(result.token_ids[result.stats.prompt_tokens :])


def test_reply_equals_mlx_vlm_alone_and_again_from_the_cache(family: Family) -> None:
    folder, eng = family
    turns = [Turn("user", QUESTION, (RED,))]
    ref = reference(folder, turns, TOKENS)
    first = eng.submit(request(turns)).result()
    assert reply_ids(first) == ref.reply_ids
    assert first.stats.prompt_tokens == len(ref.prompt_ids)
    assert first.stats.cached_tokens < first.stats.prompt_tokens - 8  # not the picture
    again = eng.submit(request(turns)).result()
    assert again.stats.cached_tokens >= again.stats.prompt_tokens - 1  # the picture cached
    assert reply_ids(again) == ref.reply_ids


def test_reply_equals_mlx_vlm_in_a_batch(family: Family) -> None:
    folder, eng = family
    target = [Turn("user", "Describe the colours.", (BLUE,))]
    others = [
        request([Turn("user", "Name a fruit.")]),
        request([Turn("user", "Which shape is it?", (GREEN,))], max_tokens=6),
    ]
    results = [h.result() for h in eng.submit_many([request(target), *others])]
    assert reply_ids(results[0]) == reference(folder, target, TOKENS).reply_ids
    assert all(r.error is None for r in results)


def test_a_chunk_that_splits_the_picture_reads_it_whole(
    family: Family, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, eng = family
    monkeypatch.setattr("engine.runtime.scheduler.PREFILL_CHUNK", 5)  # the picture spans chunks
    turns = [Turn("user", "Count the blocks.", (GREEN,))]
    assert (
        reply_ids(eng.submit(request(turns)).result()) == reference(folder, turns, TOKENS).reply_ids
    )


def test_follow_up_reuses_the_picture_and_a_second_picture_later(
    family: Family,
) -> None:
    """Each turn reuses all of the prompt it shares with the one before (the picture
    included: it is never encoded again), which is all of it but what the template writes
    only after the last message (Gemma 4's empty thought channel)."""
    folder, eng = family
    first_turn = [Turn("user", "What colour is this?", (BLUE,))]
    first = eng.submit(request(first_turn)).result()
    follow = [*first_turn, Turn("assistant", first.text), Turn("user", "Are you sure?")]
    cached = eng.submit(request(follow)).result()
    ref_first, ref_follow = reference(folder, first_turn, TOKENS), reference(folder, follow, TOKENS)
    assert cached.stats.cached_tokens >= shared(ref_first, ref_follow) - 1
    assert reply_ids(cached) == ref_follow.reply_ids
    second = [*follow, Turn("assistant", cached.text), Turn("user", "And this one?", (GREEN,))]
    later = eng.submit(request(second)).result()
    ref_second = reference(folder, second, TOKENS)
    assert later.stats.cached_tokens >= shared(ref_follow, ref_second) - 1
    if family.name not in BATCH_SENSITIVE:
        assert reply_ids(later) == ref_second.reply_ids
        return
    # The second picture read uncached, both pictures together, is mlx-vlm's reading...
    from engine.engine import Engine

    fresh = Engine()
    try:
        fresh.load_model(str(folder)).result()
        assert reply_ids(fresh.submit(request(second)).result()) == ref_second.reply_ids
    finally:
        fresh.close()
    # ...and the cached reply starts as it does: the earlier picture's cached keys were
    # computed from it read alone, a few 1e-6 away from reading it beside the second.
    assert reply_ids(later)[:1] == ref_second.reply_ids[:1]


def shared(before: Any, after: Any) -> int:
    """How many leading prompt tokens mlx-vlm's two prompts have in common."""
    same = 0
    for a, b in zip(before.prompt_ids, after.prompt_ids, strict=False):
        if a != b:
            break
        same += 1
    assert same > len(before.prompt_ids) // 2  # the earlier turns, picture and all
    return same


def test_two_pictures_in_one_message_equal_mlx_vlm(family: Family) -> None:
    folder, eng = family
    turns = [Turn("user", "Which of these two is darker?", (BLUE, GREEN))]
    result = eng.submit(request(turns)).result()
    assert reply_ids(result) == reference(folder, turns, TOKENS).reply_ids


def test_picture_with_a_json_schema_validates_alone_and_batched(family: Family) -> None:
    _, eng = family
    spec = ConstraintSpec("json_schema", json.dumps(RECEIPT), name="receipt")
    receipts = [[Turn("user", "Extract this receipt.", (data,))] for data in (RED, GREEN)]
    alone = [eng.submit(request(t, max_tokens=60, constraint=spec)).result() for t in receipts]
    for result in alone:
        assert result.error is None
        jsonschema.validate(json.loads(result.text), RECEIPT)
    # side by side the grammar forces different runs of tokens per row (rows padded to
    # the longest): each row's positions still follow its own picture
    handles = eng.submit_many([request(t, max_tokens=60, constraint=spec) for t in receipts])
    assert [h.result().text for h in handles] == [r.text for r in alone]


def test_tool_call_about_a_picture(family: Family) -> None:
    """Tools offered beside a picture: the prompt keeps the picture (as many prompt tokens
    more as the tool definitions add), and a required call parses and fits its schema."""
    from tests.test_tools_engine import LIGHT

    _, eng = family
    turns = [Turn("user", "Light the room in this photo.", (BLUE,))]
    plain = eng.submit(request(turns, max_tokens=1)).result()
    called = eng.submit(
        # one call: a random model may start a second one it cannot finish in 64 tokens
        request(
            turns, max_tokens=64, tools=[LIGHT], tool_choice="required", parallel_tool_calls=False
        )
    ).result()
    assert called.error is None, called.error
    assert called.stats.prompt_tokens > plain.stats.prompt_tokens
    assert called.tool_calls and called.tool_calls[0].name == "set_light"
    jsonschema.validate(called.tool_calls[0].arguments, LIGHT["function"]["parameters"])


def test_restart_restores_the_picture_from_the_disk_tier(family: Family, tmp_path: Path) -> None:
    from engine.engine import Engine

    folder, _ = family
    system = "You read pictures for a shop. " + " ".join(f"Rule {i}: be brief." for i in range(12))
    turns = [Turn("system", system), Turn("user", QUESTION, (GREEN,))]
    want = reference(folder, turns, TOKENS).reply_ids
    for attempt in range(2):
        eng = Engine(disk_cache_dir=tmp_path)
        eng.load_model(str(folder)).result()
        try:
            result = eng.submit(request(turns)).result()
            hits = eng.snapshot.cache.disk_hits
        finally:
            eng.close()  # closing writes what memory holds
        assert reply_ids(result) == want
        if attempt and family.name in SLIDING_WINDOW:
            assert hits == 0  # not written: the same reply, computed again
        elif attempt:
            assert hits == 1
            assert result.stats.cached_tokens >= result.stats.prompt_tokens - 1


@pytest.mark.parametrize("kind", sorted(BAD_IMAGES))
def test_bad_image_is_refused_with_its_reason(family: Family, kind: str) -> None:
    data, words = BAD_IMAGES[kind]
    result = family.engine.submit(request([Turn("user", "Look", (data,))])).result()
    assert result.error_kind == "input" and result.text == ""
    assert all(word in (result.error or "") for word in words), result.error


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_model_whose_cache_corral_cannot_hold_is_refused_at_load_saying_why(
    name: str, vision_family_dir: Any
) -> None:
    """Qwen3.5 (linear attention's recurrent state) and Llama 4 (chunked attention), built
    from mlx-vlm's own classes, load in mlx-vlm and are refused by Corral's load, naming
    the layers it cannot cache; the engine serves nothing rather than wrong replies."""
    from engine.engine import Engine
    from engine.errors import ModelLoadError

    folder = vision_family_dir(name)
    eng = Engine()
    try:
        with pytest.raises(ModelLoadError) as refused:
            eng.load_model(str(folder)).result()
        message = str(refused.value)
        assert all(word in message for word in REFUSED[name][1]), message
        assert "cannot hold" in message and str(folder) in message
        assert eng.snapshot.model is None
    finally:
        eng.close()


def test_thinking_over_a_picture_is_separated_and_the_answer_follows(
    vision_family_dir: Any,
) -> None:
    """Qwen3.5's template opens a `<think>` block in the prompt; over a picture (Qwen2-VL's
    tiny model) the thinking is mlx-vlm's greedy reply until the budget ends it, kept apart
    from the answer, which follows the closed block."""
    from engine.engine import Engine

    folder = vision_family_dir("qwen2_vl_thinking")
    turns = [Turn("user", QUESTION, (RED,))]
    budget = 4
    ref = reference(folder, turns, budget, enable_thinking=True)
    eng = Engine()
    try:
        eng.load_model(str(folder)).result()
        model = eng.snapshot.model
        assert model is not None and model.reasoning is not None
        assert model.reasoning.opens_in_prompt
        settings = SamplingSettings(max_tokens=12, temperature=0, max_thinking_tokens=budget)
        result = eng.submit(ChatRequest(corral_messages(turns), settings)).result()
    finally:
        eng.close()
    assert result.error is None, result.error
    assert result.stats.prompt_tokens == len(ref.prompt_ids)
    reply = list(result.token_ids[result.stats.prompt_tokens :])
    assert reply[:budget] == ref.reply_ids  # the thinking: mlx-vlm's reading of the picture
    assert result.stats.thinking_forced_end and result.stats.thinking_tokens >= budget
    assert result.reasoning and result.text and "<think>" not in result.text
    assert "</think>" not in result.text and "</think>" not in result.reasoning
