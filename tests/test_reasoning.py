"""Models that think first, on the tiny Qwen3-like fixture: the format is found, a
constrained reply thinks freely then answers validly, the budget ends thinking at exactly
its size, thinking off constrains from the first token, and history omits the thinking."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from engine.engine import Engine
from engine.prompt.chat import encode_chat
from engine.prompt.reasoning import detect_reasoning, reply_start
from engine.runtime.reply import request_prompt
from engine.types import (
    ChatRequest,
    ConstraintSpec,
    Finished,
    ReasoningDelta,
    SamplingSettings,
    TextDelta,
)

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 12}},
    "required": ["a", "b"],
}


def _request(**sampling: object) -> ChatRequest:
    settings = SamplingSettings(temperature=0.8, seed=3, max_tokens=60)
    for key, value in sampling.items():
        setattr(settings, key, value)
    return ChatRequest(
        [{"role": "user", "content": "Give me a and b."}],
        settings,
        constraint=ConstraintSpec("json_schema", json.dumps(SCHEMA)),
    )


def _events(engine: Engine, request: ChatRequest) -> list[object]:
    events: list[object] = []
    handle = engine.submit(request, events.append)
    handle.result()
    return events


def test_the_format_is_found_from_template_and_tokenizer(thinking_engine: Engine) -> None:
    snapshot = thinking_engine.snapshot
    assert snapshot.model is not None
    fmt = snapshot.model.reasoning
    assert fmt is not None and fmt.kind == "think_tags" and fmt.switchable
    assert (fmt.start, fmt.end) == ("<think>", "</think>")
    assert not fmt.opens_in_prompt


def test_the_default_model_has_no_reasoning_format(tiny_model) -> None:
    assert detect_reasoning(tiny_model[1]) is None


def test_an_r1_template_opens_the_block_in_the_prompt(tmp_path: Path, default_model_dir) -> None:
    from mlx_lm.utils import load_tokenizer

    from benchmarks.tiny_thinking_model import R1_LIKE_TEMPLATE, build_thinking_tokenizer

    folder = build_thinking_tokenizer(tmp_path, default_model_dir, template=R1_LIKE_TEMPLATE)
    tok = load_tokenizer(folder)
    fmt = detect_reasoning(tok)
    assert fmt is not None and fmt.opens_in_prompt and not fmt.switchable
    messages = [{"role": "user", "content": "hi"}]
    assert reply_start(fmt, encode_chat(tok, messages)) == "inside"
    # thinking off: the engine closes the block the template opened
    off = ChatRequest(messages, SamplingSettings(think=False))
    tokens, _ = request_prompt(tok, off, fmt)
    assert tokens[-1] == fmt.end_id and reply_start(fmt, tokens) != "inside"


def test_thinking_then_an_answer_that_validates(thinking_engine: Engine) -> None:
    events = _events(thinking_engine, _request(max_thinking_tokens=10))
    result = events[-1].result  # type: ignore[attr-defined]
    assert result.error is None
    assert result.reasoning is not None and result.reasoning != ""
    jsonschema.validate(json.loads(result.text), SCHEMA)
    assert "<think>" not in result.text
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert reasoning.strip() == result.reasoning and text == result.text
    # every thinking piece streams before the answer's first piece
    kinds = [type(e) for e in events if isinstance(e, ReasoningDelta | TextDelta)]
    assert kinds.index(TextDelta) > max(i for i, k in enumerate(kinds) if k is ReasoningDelta)


@pytest.mark.parametrize("budget", [0, 5, 17])
@pytest.mark.parametrize("constrained", [True, False])
def test_the_budget_ends_thinking_at_exactly_its_size(
    thinking_engine: Engine, budget: int, constrained: bool
) -> None:
    request = _request(max_thinking_tokens=budget, max_tokens=80)
    if not constrained:
        request.constraint = None
    result = thinking_engine.chat(request)
    assert result.error is None
    assert result.stats.thinking_tokens == budget
    assert result.stats.thinking_forced_end
    ids = result.token_ids[result.stats.prompt_tokens :]
    fmt = thinking_engine.snapshot.model.reasoning  # type: ignore[union-attr]
    assert ids[0] == fmt.start_id and ids[budget + 1] == fmt.end_id
    if constrained:
        jsonschema.validate(json.loads(result.text), SCHEMA)


def test_a_short_max_tokens_still_ends_valid(thinking_engine: Engine) -> None:
    # no budget of its own: thinking stops where the answer still fits max_tokens
    result = thinking_engine.chat(_request(max_tokens=40))
    assert result.error is None and not result.incomplete
    assert result.stats.generated_tokens <= 40
    assert result.stats.thinking_forced_end
    jsonschema.validate(json.loads(result.text), SCHEMA)


def test_thinking_off_constrains_from_the_first_token(thinking_engine: Engine) -> None:
    result = thinking_engine.chat(_request(think=False))
    assert result.reasoning is None and result.stats.thinking_tokens == 0
    first = result.token_ids[result.stats.prompt_tokens]
    tok = thinking_engine.run(lambda lm: lm.tokenizer).result()
    assert tok.decode([first]).startswith("{")
    jsonschema.validate(json.loads(result.text), SCHEMA)
    # the template closed an empty block in the prompt (Qwen3's switch)
    prompt = result.token_ids[: result.stats.prompt_tokens]
    assert tok.decode(prompt).endswith("<think>\n\n</think>\n\n")


def test_history_holds_reasoning_apart_and_the_next_prompt_omits_it(
    thinking_engine: Engine,
) -> None:
    first = thinking_engine.chat(_request(max_thinking_tokens=6))
    assert first.reasoning
    history = [
        {"role": "user", "content": "Give me a and b."},
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "Again."},
    ]
    second = thinking_engine.chat(ChatRequest(history, SamplingSettings(max_tokens=4)))
    tok = thinking_engine.run(lambda lm: lm.tokenizer).result()
    prompt = tok.decode(second.token_ids[: second.stats.prompt_tokens])
    assert first.reasoning not in prompt and first.text in prompt
    assert "<think>" not in prompt


def test_finished_carries_reasoning_in_json(thinking_engine: Engine) -> None:
    events = _events(thinking_engine, _request(max_thinking_tokens=3))
    finished = events[-1]
    assert isinstance(finished, Finished)
    data = finished.result.to_dict()
    assert data["reasoning"] == finished.result.reasoning
    assert data["stats"]["thinking_tokens"] == 3
