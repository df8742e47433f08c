"""One view of a model's tokenizer, whatever wraps it.

A loaded model comes with mlx-lm's `TokenizerWrapper`, which holds the Hugging Face
tokenizer privately and adds a streaming detokenizer and the model's EOS ids; tests and
tools often hold the Hugging Face tokenizer itself. `ModelTokenizer.of(either)` gives the
engine one typed object for both, and is the only code that reaches inside the wrapper.
"""

from __future__ import annotations

from typing import Any

# Used when a model ships no chat template: ChatML, the most widely understood format.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class ModelTokenizer:
    """A model's tokenizer: encoding, its chat template, special tokens and detokenizing.

    `hf` is the Hugging Face tokenizer; `wrapper` is mlx-lm's TokenizerWrapper when there is
    one (None for a bare Hugging Face tokenizer).
    """

    def __init__(self, tokenizer: Any) -> None:
        """`tokenizer`: an mlx-lm TokenizerWrapper or a Hugging Face tokenizer."""
        inner = getattr(tokenizer, "_tokenizer", None)
        self.wrapper: Any = tokenizer if inner is not None else None
        self.hf: Any = inner if inner is not None else tokenizer

    @classmethod
    def of(cls, tokenizer: Any) -> ModelTokenizer:
        """`tokenizer` itself if it is already a ModelTokenizer, else a view of it."""
        return tokenizer if isinstance(tokenizer, ModelTokenizer) else cls(tokenizer)

    @property
    def source(self) -> Any:
        """What the model was loaded with (the wrapper if any): the key for per-tokenizer
        caches, which must outlive this view."""
        return self.wrapper if self.wrapper is not None else self.hf

    # ---- text and tokens ----

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, with no BOS or other special tokens added."""
        return [int(t) for t in self.hf.encode(text, add_special_tokens=False)]

    def token_id(self, token: str) -> int | None:
        """The id of `token` if it is one token of the vocabulary (no copy of the vocabulary)."""
        if not hasattr(self.hf, "convert_tokens_to_ids"):
            return None
        token_id = self.hf.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and self.hf.convert_ids_to_tokens(token_id) == token:
            return token_id
        return None  # unknown tokens map to the unk id, whose text differs

    def added_token_id(self, text: str) -> int | None:
        """The id of `text` if the tokenizer has it as one added (special) token, else None."""
        added = getattr(self.hf, "added_tokens_decoder", None) or {}
        for token_id, token in added.items():
            if getattr(token, "content", None) == text:
                return int(token_id)
        return None

    @property
    def eos_token_ids(self) -> set[int]:
        """The model's own end-of-sequence ids (its chat template may end turns with others)."""
        found = getattr(self.wrapper, "eos_token_ids", None) if self.wrapper is not None else None
        if found is None:
            eos = getattr(self.hf, "eos_token_id", None)
            found = [] if eos is None else [eos]
        return {int(t) for t in found}

    def detokenizer(self) -> Any:
        """A new streaming detokenizer (mlx-lm's: add_token, finalize, last_segment)."""
        if self.wrapper is None:
            raise TypeError("streaming detokenizing needs mlx-lm's TokenizerWrapper")
        return self.wrapper.detokenizer  # a fresh copy per call

    # ---- the chat template ----

    @property
    def chat_template(self) -> str | None:
        """The chat template as text (the `tool_use` one of a named set), or None."""
        template = getattr(self.hf, "chat_template", None)
        if template is None and self.wrapper is not None:
            template = getattr(self.wrapper, "chat_template", None)
        if isinstance(template, dict):
            template = template.get("tool_use") or template.get("default")
        if isinstance(template, list):  # [{"name": ..., "template": ...}] as in tokenizer_config
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("tool_use") or named.get("default")
        return template if isinstance(template, str) else None

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> str:
        """`messages` rendered to text by the model's chat template (ChatML if it has none),
        through `engine.prompt.templates` (`chat_template=` renders another template).
        Raises TemplateRenderError (a ValueError) naming the template's line."""
        from engine.prompt.templates import render_template, special_tokens_of

        template = template_kwargs.pop("chat_template", None) or self.chat_template
        return render_template(
            template or DEFAULT_CHAT_TEMPLATE,
            messages,
            add_generation_prompt=add_generation_prompt,
            special_tokens=special_tokens_of(self.hf),
            **template_kwargs,
        )
