"""Incremental reply text: detokenize token by token, hold back possible stop strings, and
leave out markup the reply must not show."""

from __future__ import annotations

from typing import Any

from engine.prompt.tokenizer import ModelTokenizer


class ReplyText:
    """Accumulates a reply's text and decides what can be shown yet.

    Text that might be the start of a stop string is held back until it is clearly not,
    so a stop string never flashes on screen and is never part of the reply. `hidden`
    strings (markup a model copies from its prompt) are held back the same way and left
    out of the text wherever they appear; the reply goes on.
    """

    def __init__(self, tokenizer: Any, stop: list[str], hidden: list[str] | None = None) -> None:
        self._detok = ModelTokenizer.of(tokenizer).detokenizer()
        self._stop = [s for s in stop if s]
        self._hidden = [s for s in hidden or [] if s]
        self._max_stop = max((len(s) for s in [*self._stop, *self._hidden]), default=0)
        self.text = ""
        self._shown = 0
        self.stopped = False

    def add(self, token: int) -> str:
        """Add a token; return newly showable text. Sets `stopped` when a stop string appears."""
        self._detok.add_token(token)
        return self._extend(self._detok.last_segment)

    def finish(self) -> str:
        """Flush what the detokenizer still holds and everything held back."""
        if not self.stopped:
            self._detok.finalize()
            self._extend(self._detok.last_segment)
        return self._take(len(self.text))

    def _extend(self, segment: str) -> str:
        if self.stopped or not segment:
            return ""
        start = max(0, len(self.text) - self._max_stop)
        self.text += segment
        if self._hidden:  # only text not shown yet can hold one: its start was held back
            tail = self.text[self._shown :]
            while any(h in tail for h in self._hidden):
                for h in self._hidden:
                    tail = tail.replace(h, "")
            self.text = self.text[: self._shown] + tail
            start = min(start, len(self.text))
        if self._stop:
            hits = [i for s in self._stop if (i := self.text.find(s, start)) != -1]
            if hits:
                self.text = self.text[: min(hits)]
                self.stopped = True
                return self._take(len(self.text))
        return self._take(len(self.text) - self._held_back())

    def _held_back(self) -> int:
        """Length of the longest tail of the text that begins some stop string."""
        for n in range(min(self._max_stop - 1, len(self.text)), 0, -1):
            tail = self.text[-n:]
            if any(s.startswith(tail) for s in [*self._stop, *self._hidden]):
                return n
        return 0

    def _take(self, end: int) -> str:
        if end <= self._shown:
            return ""
        piece = self.text[self._shown : end]
        self._shown = end
        return piece
