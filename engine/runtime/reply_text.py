"""Incremental reply text: detokenize token by token and hold back possible stop strings."""

from __future__ import annotations

from typing import Any

from engine.prompt.tokenizer import ModelTokenizer


class ReplyText:
    """Accumulates a reply's text and decides what can be shown yet.

    Text that might be the start of a stop string is held back until it is clearly not,
    so a stop string never flashes on screen and is never part of the reply.
    """

    def __init__(self, tokenizer: Any, stop: list[str]) -> None:
        self._detok = ModelTokenizer.of(tokenizer).detokenizer()
        self._stop = [s for s in stop if s]
        self._max_stop = max((len(s) for s in self._stop), default=0)
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
            if any(s.startswith(tail) for s in self._stop):
                return n
        return 0

    def _take(self, end: int) -> str:
        if end <= self._shown:
            return ""
        piece = self.text[self._shown : end]
        self._shown = end
        return piece
