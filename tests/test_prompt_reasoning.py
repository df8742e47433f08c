"""Thinking in each family's own syntax (engine.prompt.reasoning): every thinking template of
the dataset is recognised, and a tiny random model whose tokenizer carries the template
and its markers has its thinking separated from its answer, the block opened and closed
by the engine (forced), so the outcome never rests on what the random model writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.prompt.reasoning import (
    SYNTAXES,
    detect_reasoning,
    reply_start,
    switched_messages,
    syntax_of,
)
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings
from tests.template_support import markers_of, template_paths, template_tokenizer

# The syntax each thinking template of the dataset speaks.
EXPECTED = {
    "apertus.jinja": "apertus",
    "apriel-1.6-thinker.jinja": "apriel",
    "command-r7b.jinja": "command_r",
    "deepseek-r1-distill-qwen.jinja": "think",
    "deepseek-v3.1.jinja": "think",
    "deepseek-v3.2.jinja": "think",
    "gemma-4.jinja": "gemma4_channel",
    "glm-4.5.jinja": "think",
    "glm-4.6.jinja": "think",
    "gpt-oss.jinja": "harmony",
    "granite-3.3.jinja": "granite",
    "kimi-k2-thinking.jinja": "think",
    "kimi-k3.jinja": "kimi_k3",
    "magistral-small-2509.jinja": "mistral_think",
    "minimax-m2.jinja": "think",
    "nemotron-nano-v2.jinja": "think",
    "qwen3.5.jinja": "think",
    "qwen3.jinja": "think",
    "qwq.jinja": "think",
    "smollm3.jinja": "think",
}
# Where the generation prompt itself opens the block.
OPENS_IN_PROMPT = {
    "apriel-1.6-thinker.jinja",
    "deepseek-r1-distill-qwen.jinja",
    "kimi-k3.jinja",
    "qwq.jinja",
    "deepseek-v3.1.jinja",
    "nemotron-nano-v2.jinja",
    "deepseek-v3.2.jinja",
    "minimax-m2.jinja",
    "qwen3.5.jinja",
}


# Templates whose engine run is not checked here (none: every thinking template is).
ENGINE_GAPS: set[str] = set()


def test_every_thinking_template_is_recognised() -> None:
    found = {}
    for path in template_paths():
        syntax = syntax_of(path.read_text(encoding="utf-8"))
        if syntax is not None:
            found[path.name] = syntax.name
    assert found == EXPECTED


def _syntax_markers(template: str) -> list[str]:
    syntax = syntax_of(template)
    assert syntax is not None
    pieces = syntax.opener + syntax.closer + syntax.prefix
    return [*syntax.markers(), *markers_of(pieces)]


@pytest.fixture(scope="module")
def thinking_folders(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path):
    """name -> a tiny random model folder whose tokenizer carries that template."""
    from benchmarks.tiny_model import build_tiny_model

    folders = {}
    for path in template_paths():
        if path.name not in EXPECTED:
            continue
        template = path.read_text(encoding="utf-8")
        root = tmp_path_factory.mktemp(path.stem)
        tok_dir = template_tokenizer(
            default_model_dir, template, root / "tok", _syntax_markers(template)
        )
        build_tiny_model(root / "model", tok_dir)
        for name in ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"):
            if (tok_dir / name).exists():
                (root / "model" / name).write_bytes((tok_dir / name).read_bytes())
        folders[path.name] = root / "model"
    return folders


def test_each_syntax_is_steered_and_opens_where_its_prompt_does(thinking_folders) -> None:
    from mlx_lm.utils import load_tokenizer

    from engine.prompt.chat import encode_chat
    from engine.prompt.reasoning import thinking_kwargs

    opens = set()
    for name, folder in thinking_folders.items():
        tok = load_tokenizer(folder)
        fmt = detect_reasoning(tok)
        assert fmt is not None and fmt.steerable, name
        assert fmt.syntax == EXPECTED[name]
        if fmt.opens_in_prompt:
            opens.add(name)
        prompt = encode_chat(tok, [{"role": "user", "content": "hi"}], **thinking_kwargs(fmt, True))
        assert reply_start(fmt, prompt) == ("inside" if fmt.opens_in_prompt else "before"), name
        if fmt.switchable:  # switched off: the reply does not start inside a block
            hi = switched_messages(fmt, [{"role": "user", "content": "hi"}], False)
            off = encode_chat(tok, hi, **thinking_kwargs(fmt, False))
            assert reply_start(fmt, off) != "inside", name
    assert opens == OPENS_IN_PROMPT


def test_thinking_is_separated_in_every_thinking_syntax(thinking_folders) -> None:
    """Each model loaded once, asked with and without a constraint on its answer."""
    from engine.engine import Engine

    engine = Engine()
    try:
        for name, folder in thinking_folders.items():
            if name in ENGINE_GAPS:
                continue
            engine.load_model(str(folder)).result()
            fmt = engine.snapshot.model.reasoning  # type: ignore[union-attr]
            for constrained in (True, False):
                settings = SamplingSettings(
                    temperature=0.0, max_tokens=14, think=True, max_thinking_tokens=3
                )
                constraint = ConstraintSpec("regex", "(yes|no)") if constrained else None
                request = ChatRequest([{"role": "user", "content": "Yes?"}], settings, constraint)
                result = engine.chat(request)
                case = (name, constrained)
                assert result.error is None, (case, result.error)
                assert result.reasoning is not None, case
                assert result.stats.thinking_tokens <= 3 and result.stats.thinking_forced_end, case
                # the engine opened the block (the reply thought) and closed it (the budget)
                assert fmt.end not in result.reasoning, case
                assert not constrained or fmt.end not in result.text, case
                if constrained:
                    assert re.fullmatch("yes|no", result.text), (case, result.text)
    finally:
        engine.close()


def test_the_registry_tries_specific_syntaxes_before_plain_think_tags() -> None:
    names = [s.name for s in SYNTAXES]
    assert names.index("harmony") < names.index("think")
    assert names.index("granite") < names.index("think")
    assert syntax_of("no thinking here") is None


def test_templates_are_told_the_effort_their_budget_stands_for() -> None:
    from engine.prompt.reasoning import thinking_kwargs
    from engine.prompt.templates import render_template
    from engine.types import ReasoningFormat
    from tests.template_support import template_text

    user = [{"role": "user", "content": "hi"}]
    harmony = ReasoningFormat(
        "channels", "<|channel|>", "<|end|>", 1, 2, effort_variable="reasoning_effort"
    )
    assert thinking_kwargs(harmony, True, 200) == {"reasoning_effort": "low"}
    assert thinking_kwargs(harmony, True, None) == {}  # the template's own default
    text = render_template(
        template_text("gpt-oss.jinja"), user, **thinking_kwargs(harmony, True, 4096)
    )
    assert "Reasoning: high" in text
    kimi = ReasoningFormat(
        "think_tags",
        "<|open|>",
        "<|close|>",
        1,
        2,
        switches=("thinking",),
        effort_variable="thinking_effort",
    )
    text = render_template(
        template_text("kimi-k3.jinja"), user, **thinking_kwargs(kimi, True, 1000)
    )
    assert "thinking_effort=medium" in text
    off = render_template(template_text("kimi-k3.jinja"), user, **thinking_kwargs(kimi, False))
    assert off.endswith("<|open|>response<|sep|>")


def test_an_end_of_several_tokens_is_opened_budgeted_and_closed(
    tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path
) -> None:
    """Apriel's `[BEGIN FINAL RESPONSE]` is several tokens in its tokenizer (the family
    model adds only the template's special markers): the engine still steers it, free and
    constrained. Its thinking is budgeted and the end written as its exact tokens, which
    never reach the reasoning or the answer; a reply that does not think has the block
    closed in its prompt."""
    from mlx_lm.tokenizer_utils import load

    from benchmarks.tiny_family_model import build_family_models
    from engine.engine import Engine
    from tests.template_support import template_paths

    path = next(p for p in template_paths() if p.name == "apriel-1.6-thinker.jinja")
    folder = build_family_models(tmp_path_factory.mktemp("apriel"), default_model_dir, [path])
    tok = load(folder[path.stem])
    fmt = detect_reasoning(tok)
    assert fmt is not None and fmt.steerable and fmt.end_is_text and len(fmt.closing) > 1
    end = list(fmt.closing)

    def holds_end(ids: list[int]) -> int:
        return sum(ids[i : i + len(end)] == end for i in range(len(ids)))

    engine = Engine()
    try:
        engine.load_model(str(folder[path.stem])).result()
        for constraint in (None, ConstraintSpec("regex", "(yes|no)")):
            settings = SamplingSettings(
                temperature=0.0, max_tokens=30, think=True, max_thinking_tokens=3
            )
            result = engine.chat(
                ChatRequest([{"role": "user", "content": "Yes?"}], settings, constraint)
            )
            assert result.error is None and result.reasoning is not None, result.error
            assert result.stats.thinking_tokens <= 3 + len(end)
            assert result.stats.thinking_forced_end
            assert holds_end(result.reply_token_ids) == 1  # the end, as its exact tokens
            assert fmt.end not in result.reasoning and fmt.end not in result.text
            if constraint is not None:
                assert re.fullmatch("yes|no", result.text), result.text
        off = engine.chat(
            ChatRequest(
                [{"role": "user", "content": "Yes?"}],
                SamplingSettings(temperature=0.0, max_tokens=8, think=False),
            )
        )
        assert off.reasoning is None and off.error is None
        prompt = off.token_ids[: off.stats.prompt_tokens]
        assert prompt[-len(end) :] == end  # closed in the prompt: the reply is the answer
    finally:
        engine.close()


def test_a_template_switched_by_words_in_the_system_message_is_told_them(
    default_model_dir: Path, tmp_path: Path
) -> None:
    """Nemotron Super's template ignores `enable_thinking`: `/no_think` in the system
    message switches its thinking off, and a reply that does not think gets it there."""
    from mlx_lm.utils import load_tokenizer

    from engine.prompt.chat import encode_chat

    fixture = Path(__file__).resolve().parent / "fixtures" / "chat-templates"
    template = (fixture / "nemotron-super-v1.5.jinja").read_text(encoding="utf-8")
    tok = load_tokenizer(template_tokenizer(default_model_dir, template, tmp_path / "tok"))
    fmt = detect_reasoning(tok)
    assert fmt is not None and fmt.switchable and fmt.switch_words == ("/think", "/no_think")
    ask = [{"role": "user", "content": "hi"}]
    assert switched_messages(fmt, ask, True) == ask
    off = switched_messages(fmt, ask, False)
    assert off[0] == {"role": "system", "content": "/no_think"}
    text = tok.decode(encode_chat(tok, off))
    assert text.endswith("<think>\n\n</think>\n\n") and "/no_think" not in text
    said = [{"role": "system", "content": "Be brief. /think"}, *ask]
    assert switched_messages(fmt, said, False) == said  # the user's own word stands
