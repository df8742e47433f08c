"""A constraint's grammar, converted and checked once, compiled once per tokenizer.

`engine.constraints.validate` makes a CompiledGrammar when it checks a constraint and hangs
it on the ConstraintSpec it returns, so every request that uses that spec (the app keeps it
for the conversation) starts from the same llguidance grammar: no second conversion. The
first request with a model's tokenizer compiles an llguidance matcher (or validation already
did, with the model's tokenizer); every later one copies it, which costs microseconds where
compiling a JSON schema against a 49k vocabulary costs milliseconds to seconds.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import llguidance
from llguidance import LLMatcher

if TYPE_CHECKING:
    from engine.types import ConstraintSpec


class CompiledGrammar:
    """llguidance's serialized grammar for one constraint and its compiled matchers.

    Safe to share between threads: the compiled matcher is never advanced, only copied.
    """

    def __init__(
        self, grammar: str, notes: list[str] | tuple[str, ...] = (), fallback: str | None = None
    ) -> None:
        self.grammar = grammar  # llguidance's TopLevelGrammar, as JSON text
        # the schema as written, for when its tightened version does not compile (an
        # llguidance limit the rewrite ran into): then the tight defaults are dropped
        self._fallback = fallback
        # what the tight defaults did to a JSON schema, and what llguidance relaxed (its
        # warnings, known once a matcher is compiled)
        self.notes: tuple[str, ...] = tuple(notes)
        self.warnings: tuple[str, ...] = ()
        self._lock = threading.Lock()
        # One tokenizer at a time: the loaded model's (a new model compiles afresh).
        self._tokenizer: llguidance.LLTokenizer | None = None
        self._pristine: LLMatcher | None = None
        self.compiles = 0  # matchers compiled from the grammar, for tests and benchmarks

    def grammars(self) -> list[dict[str, Any]]:
        """The grammar as llguidance's list of grammar objects (a TopLevelGrammar's
        `grammars`), to build a larger grammar that refers to it."""
        if self.grammar.lstrip().startswith("{"):
            found: list[dict[str, Any]] = json.loads(self.grammar)["grammars"]
            return found
        return [{"lark_grammar": self.grammar}]  # llguidance also takes bare Lark text

    def use_fallback(self) -> bool:
        """Give up the tight defaults for the grammar as written; False if there is none."""
        with self._lock:
            if self._fallback is None:
                return False
            self.grammar, self._fallback = self._fallback, None
            self.notes = ()
            self._tokenizer = self._pristine = None
            return True

    def keep(self, tokenizer: llguidance.LLTokenizer, matcher: LLMatcher) -> None:
        """Adopt `matcher`, freshly compiled from this grammar for `tokenizer` and not
        advanced yet, as the one later requests copy."""
        with self._lock:
            self._tokenizer, self._pristine = tokenizer, matcher
            self.warnings = tuple(matcher.get_grammar_warnings())
            self.compiles += 1

    def matcher(self, tokenizer: llguidance.LLTokenizer) -> LLMatcher:
        """A fresh matcher for `tokenizer`: a copy of the compiled one (compiled now if this
        is the first use with `tokenizer`). Check `is_error()` on the result."""
        with self._lock:
            if self._pristine is None or self._tokenizer is not tokenizer:
                self._pristine = LLMatcher(tokenizer, self.grammar, log_level=0)
                self._tokenizer = tokenizer
                self.compiles += 1
                if self._pristine.is_error() and self._fallback is not None:
                    self.grammar, self._fallback, self.notes = self._fallback, None, ()
                    self._pristine = LLMatcher(tokenizer, self.grammar, log_level=0)
                    self.compiles += 1
                if not self._pristine.is_error():
                    self.warnings = tuple(self._pristine.get_grammar_warnings())
            pristine = self._pristine
        # A grammar that failed to compile stays failed: the copy carries the error.
        return pristine.deep_copy()


def compiled_of(spec: ConstraintSpec) -> CompiledGrammar | None:
    """The CompiledGrammar validation hung on `spec` (engine.types sees it only as a
    CompiledConstraint: that package imports nothing of llguidance's)."""
    compiled = spec.compiled
    if compiled is not None and not isinstance(compiled, CompiledGrammar):
        raise TypeError(f"{spec.name or spec.kind}: compiled by something else: {compiled!r}")
    return compiled
