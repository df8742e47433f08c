"""History as each template wants it: a reply re-rendered in the next request's prompt is
token-identical to what the model generated, where the template allows it (so the prompt
cache's trie reuses the turn), and an earlier reply's thinking reaches the templates that
keep it (`reasoning_content`, or `thinking` for gpt-oss) and is dropped by those that do not."""

from __future__ import annotations

from pathlib import Path

from engine.prompt.chat import encode_chat
from engine.prompt.reasoning import syntax_of
from engine.prompt.templates import render_template
from tests.template_support import template_paths, template_tokenizer

CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
ANSWER = "Hello, friend."

# Templates whose rendering of a plain reply differs from what was generated after their
# generation prompt: each writes the turn its own way (R1/QwQ drop the `<think>` their prompt
# opened; Gemma 4 drops the empty thought channel; GLM and Kimi K2 add an empty think block;
# Granite 3.3 and Functionary change the turn's header; Mistral Nemo moves the system
# prompt into the last user turn; Apriel, DeepSeek V3.2 and Kimi K3 re-wrap the answer).
REWRITTEN = {
    "apriel-1.6-thinker.jinja",
    "deepseek-r1-distill-qwen.jinja",
    "deepseek-v3.2.jinja",
    "functionary-v3.2.jinja",
    "gemma-4.jinja",
    "glm-4.5.jinja",
    "glm-4.6.jinja",
    "granite-3.3.jinja",
    "kimi-k2-thinking.jinja",
    "kimi-k3.jinja",
    "mistral-nemo.jinja",
    "qwq.jinja",
}
# Templates whose re-rendered reply is text-identical but not token-identical (none: each
# reply is tokenized from where its generation prompt ended, `engine.prompt.chat`).
WHITESPACE_SPLIT: set[str] = set()
# Templates that keep the thinking of the latest reply in the history they render.
KEEPS_THINKING = {
    "apriel-1.6-thinker.jinja",
    "deepseek-v3.2.jinja",
    "glm-4.5.jinja",
    "glm-4.6.jinja",
    "gpt-oss.jinja",
    "kimi-k3.jinja",
    "minimax-m2.jinja",
    "qwen3.5.jinja",
    "qwen3.jinja",
}


def _switches(template: str, on: bool) -> dict[str, bool]:
    syntax = syntax_of(template)
    return dict.fromkeys(syntax.switches, on) if syntax is not None else {}


def test_a_reply_re_rendered_is_token_identical_where_the_template_allows(
    tmp_path: Path, default_model_dir: Path
) -> None:
    """Each template on a tokenizer that has its markers as tokens, as the family's does."""
    from mlx_lm.tokenizer_utils import load

    text_rewritten, token_split = set(), set()
    for path in template_paths():
        template = path.read_text(encoding="utf-8")
        syntax = syntax_of(template)
        extra = syntax.markers() if syntax is not None else []
        folder = template_tokenizer(default_model_dir, template, tmp_path / path.stem, extra)
        tokenizer = load(folder)
        off = _switches(template, False)
        # what the model writes: its answer prefix (Command R7B's <|START_RESPONSE|>) and text
        generated = (syntax.prefix if syntax is not None else "") + ANSWER
        reply = [{"role": "assistant", "content": ANSWER}]
        prompt_text = render_template(template, CONVERSATION, **off)
        history_text = render_template(
            template, CONVERSATION + reply, add_generation_prompt=False, **off
        )
        if not history_text.startswith(prompt_text + generated):
            text_rewritten.add(path.name)
            continue
        prompt = encode_chat(tokenizer, CONVERSATION, **off)
        history = encode_chat(tokenizer, CONVERSATION + reply, add_generation_prompt=False, **off)
        turn = prompt + tokenizer.encode(generated, add_special_tokens=False)
        if history[: len(turn)] != turn:
            token_split.add(path.name)
    assert text_rewritten == REWRITTEN, sorted(text_rewritten ^ REWRITTEN)
    assert token_split == WHITESPACE_SPLIT, sorted(token_split ^ WHITESPACE_SPLIT)
    assert len(template_paths()) - len(REWRITTEN | WHITESPACE_SPLIT) >= 28


def test_thinking_is_kept_where_the_template_keeps_it() -> None:
    keeps = set()
    for path in template_paths():
        template = path.read_text(encoding="utf-8")
        reply = {"role": "assistant", "content": ANSWER, "reasoning_content": "I pondered."}
        text = render_template(
            template,
            [*CONVERSATION, reply],
            add_generation_prompt=False,
            **_switches(template, True),
        )
        if "I pondered." in text:
            keeps.add(path.name)
    assert keeps == KEEPS_THINKING


def test_the_server_passes_an_earlier_replys_thinking_to_the_template() -> None:
    from engine.server.schemas import MessageBody
    from engine.server.translate import _message

    body = MessageBody(role="assistant", content="Hi", reasoning_content="I pondered.")
    assert _message(body, 0, None)["reasoning_content"] == "I pondered."  # type: ignore[arg-type]


def test_a_reply_after_a_blank_line_keeps_its_own_tokens(default_model_dir: Path) -> None:
    """Without the dataset: a generation prompt ending in "\\n\\n" (Llama 3's shape), whose
    blank line the reply's first word would otherwise split differently."""
    from mlx_lm.tokenizer_utils import load

    tokenizer = load(default_model_dir)
    tokenizer._tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n\n{{ m.content }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n\n{% endif %}"
    )
    prompt = encode_chat(tokenizer, CONVERSATION)
    reply = tokenizer.encode(ANSWER, add_special_tokens=False)
    history = encode_chat(
        tokenizer,
        [
            *CONVERSATION,
            {"role": "assistant", "content": ANSWER},
            {"role": "user", "content": "Ok"},
        ],
    )
    assert history[: len(prompt) + len(reply)] == prompt + reply
