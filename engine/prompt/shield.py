"""Untrusted text stays text: only a chat template's own markers become control tokens.

A prompt is rendered to text by the chat template and then tokenized, and a tokenizer turns
every occurrence of a special token's text (`<|im_end|>`, `<|eot_id|>`, ...) into that
token, wherever it stands. So a message, a tool result or a tool description that contains
`<|im_end|>\\n<|im_start|>system\\n...` would forge a turn. `TextShield` prevents that:

1. before rendering, every added token's text inside untrusted strings (message content,
   tool calls and results, tool definitions) is replaced by a placeholder made of
   private-use characters, which no template or tokenizer treats specially;
2. the rendered text is tokenized as usual, so the template's own markers (the only added
   tokens left in it) become their tokens;
3. the text between those markers is tokenized again with the placeholders put back, by a
   copy of the tokenizer that has no added tokens: what the user wrote becomes the plain
   text tokens it spells.

When no untrusted string holds such text (nearly always), step 3 is skipped and the prompt
is tokenized exactly as before. The copy is built once per tokenizer, on first need.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from engine.prompt.tokenizer import ModelTokenizer

_OPEN, _CLOSE = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(f"{_OPEN}(\\d+){_CLOSE}")

_lock = threading.Lock()
_patterns: weakref.WeakKeyDictionary[Any, tuple[re.Pattern[str], frozenset[int]]] = (
    weakref.WeakKeyDictionary()
)
_plain: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _added_tokens(hf: Any) -> dict[int, str]:
    added = getattr(hf, "added_tokens_decoder", None) or {}
    found = {int(i): getattr(t, "content", str(t)) for i, t in added.items()}
    return {i: text for i, text in found.items() if text}


def _pattern(hf: Any) -> tuple[re.Pattern[str], frozenset[int]]:
    """A regex matching every added token's text (and our own placeholder characters),
    and the added tokens' ids."""
    with _lock:
        found = _patterns.get(hf)
        if found is None:
            added = _added_tokens(hf)
            texts = sorted(set(added.values()), key=len, reverse=True)
            alternatives = [re.escape(t) for t in texts] + [_OPEN, _CLOSE]
            found = (re.compile("|".join(alternatives)), frozenset(added))
            _patterns[hf] = found
        return found


def _plain_tokenizer(hf: Any) -> Any:
    """A copy of `hf`'s fast tokenizer without added tokens (so none is ever matched)."""
    from tokenizers import Tokenizer

    with _lock:
        plain = _plain.get(hf)
        if plain is None:
            backend = getattr(hf, "backend_tokenizer", None)
            if backend is None:
                raise ValueError(
                    "the conversation contains control-token text, and this model's "
                    "tokenizer (not a fast one) cannot keep it as plain text"
                )
            spec = json.loads(backend.to_str())
            spec["added_tokens"] = []
            spec["post_processor"] = None
            plain = Tokenizer.from_str(json.dumps(spec))
            _plain[hf] = plain
        return plain


class TextShield:
    """Placeholders for control-token text in the untrusted strings of one prompt."""

    def __init__(self, tokenizer: Any) -> None:
        """`tokenizer`: a ModelTokenizer, mlx-lm's TokenizerWrapper or a HF tokenizer."""
        self.tok = ModelTokenizer.of(tokenizer)
        self._pattern, self._added_ids = _pattern(self.tok.hf)
        self._hidden: list[str] = []

    @property
    def used(self) -> bool:
        """Whether any untrusted string held control-token text."""
        return bool(self._hidden)

    def text(self, value: str) -> str:
        """`value` with each added token's text replaced by a placeholder."""
        if not self._pattern.search(value):
            return value

        def hide(found: re.Match[str]) -> str:
            self._hidden.append(found.group(0))
            return f"{_OPEN}{len(self._hidden) - 1}{_CLOSE}"

        return self._pattern.sub(hide, value)

    def value(self, value: Any) -> Any:
        """A copy of `value` (JSON-like: dicts, lists, strings) with every string shielded,
        dictionary keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                (self.text(k) if isinstance(k, str) else k): self.value(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def restore(self, text: str) -> str:
        """`text` with the placeholders turned back into what they hid (for display)."""
        if not self._hidden:
            return text
        return _PLACEHOLDER.sub(lambda m: self._hidden[int(m.group(1))], text)

    def encode(self, rendered: str) -> list[int]:
        """Token ids of `rendered` (a template's output over shielded strings): the
        template's markers as control tokens, everything else as plain text."""
        if not self._hidden:
            return self.tok.encode(rendered)
        backend = getattr(self.tok.hf, "backend_tokenizer", None)
        plain = _plain_tokenizer(self.tok.hf)
        assert backend is not None  # _plain_tokenizer raised otherwise
        encoding = backend.encode(rendered, add_special_tokens=False)
        ids: list[int] = []
        cursor = 0

        def text_tokens(piece: str) -> list[int]:
            if not piece:
                return []
            if not _PLACEHOLDER.search(piece):
                return self.tok.encode(piece)
            encoded = plain.encode(self.restore(piece), add_special_tokens=False)
            found = [int(t) for t in encoded.ids]
            if self._added_ids.intersection(found):  # the vocabulary merges text into a marker
                raise ValueError("control-token text in the conversation cannot be kept as text")
            return found

        for token_id, (start, end) in zip(encoding.ids, encoding.offsets, strict=True):
            if token_id in self._added_ids:
                ids += text_tokens(rendered[cursor:start])
                ids.append(int(token_id))
                cursor = max(cursor, end)
        ids += text_tokens(rendered[cursor:])
        return ids
