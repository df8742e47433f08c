"""Closing within the budget: end a constrained reply validly before `max_tokens`.

`ClosingPolicy.ending` walks a copy of a matcher (llguidance's `deep_copy`), without the
model, choosing at each step the allowed token that ends the structure soonest: the
grammar's forced tokens; in a string the quote cannot close yet (a formatted value half
written: `"bob` in an `email`), the shortest tail of a known short value after which the
matcher accepts the quote (`@a`, see `formats`), tried once per string; in a number that
may not end yet (a `multipleOf` the digits miss), the fewest digits after which it may
(`1` + `32` for a multiple of 44), tried once per number; else a closing
token (`"`, `}`, `]`, `"}` ...; the longest one allowed), else the shortest value (`0`,
`""`, `{}`, `null` ...), else the allowed token after which the grammar accepts or forces
text soonest (a one-token lookahead over the shortest allowed tokens). It stops as soon as
the grammar accepts (EOS ends the reply there). The result is a short valid ending, not
always the shortest.

`ClosingTracker` decides, for one reply (one row of a batch), when to compute that ending
and when to follow it: rarely while the budget is far (first when at most half of it, or
`FIRST_CHECK` tokens, remain, then whenever half of the slack left at the last check is
used up; the slack counted against the longest ending seen, since an ending's length
swings with where the reply is), every token near the end, and at once when
`RepetitionDetector` sees the reply repeat itself inside one value. A decode loop calls
`after` on the mask thread each time the matcher has consumed the reply's newest tokens;
when it returns tokens, the loop emits them and stops: the reply ends accepted by the
grammar, `closed_to_fit`.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import llguidance
import numpy as np
from llguidance import LLMatcher

from engine.constraints.formats import value_tails

FIRST_CHECK = 64  # tokens left when the ending is first computed (or half the budget)
MARGIN = 6  # tokens kept in hand: an ending can grow by a few tokens between checks
LOOKAHEAD = 32  # the walk goes this far past the budget, to say how much was missing
CANDIDATES = 48  # allowed tokens tried one step ahead when nothing closes
CANCEL_EVERY = 16  # walk steps between looks at whether the reply was cancelled
UNOWNED_POLICIES = 4  # policies kept for tokenizers no model owns (grammar checks)

# Digits a number's tail is made of, up to NUMBER_TAIL of them: enough for any residue
# modulo a `multipleOf` below 10**NUMBER_TAIL.
NUMBER_TAIL = 3
_NUMBER_BYTES = frozenset(b"0123456789.-")
# What may follow a number inside a structure.
_NUMBER_ENDS = (b"}", b",", b"]")
# Short values, tried wherever a value may start.
_VALUES = (b"0", b"1", b'""', b"{}", b"[]", b"null", b"true", b"false", b",")


class Nesting:
    """How deep the reply's text is in JSON-like structure: open brackets, and whether it
    is inside a string. A lexical view (it reads any grammar's text the same way), kept up
    to date token by token; the walk scores candidate tokens with it."""

    __slots__ = ("stack", "in_string", "escaped", "strings", "last")

    def __init__(self) -> None:
        self.stack: list[int] = []
        self.in_string = False
        self.escaped = False
        self.strings = 0  # strings opened so far: which string the text is in
        self.last = 0  # the text's last byte (0 before any)

    @property
    def depth(self) -> int:
        return len(self.stack) + self.in_string

    @property
    def in_number(self) -> bool:
        """Whether the text ends inside a number, as far as bytes tell (a digit, a sign or
        a decimal point outside a string)."""
        return not self.in_string and self.last in _NUMBER_BYTES

    def copy(self) -> Nesting:
        twin = Nesting()
        twin.stack, twin.in_string, twin.escaped = list(self.stack), self.in_string, self.escaped
        twin.strings, twin.last = self.strings, self.last
        return twin

    def feed(self, text: bytes) -> None:
        if text:
            self.last = text[-1]
        for c in text:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif c == 0x5C:  # backslash
                    self.escaped = True
                elif c == 0x22:
                    self.in_string = False
            elif c == 0x22:
                self.in_string = True
                self.strings += 1
            elif c in (0x7B, 0x5B):  # { [
                self.stack.append(c)
            elif c in (0x7D, 0x5D) and self.stack:  # } ]
                self.stack.pop()

    def depth_after(self, text: bytes) -> int:
        twin = self.copy()
        twin.feed(text)
        return twin.depth


class ClosingPolicy:
    """Greedy short endings for one llguidance tokenizer (its token texts, read once)."""

    # A policy lives as long as what owns its tokenizer (a loaded model's tokenizer, see
    # `remember`): LLTokenizer cannot be weakly referenced, so policies are found by the
    # tokenizer's id among live ones, and held strongly only by their owner's entry.
    _live: weakref.WeakValueDictionary[int, ClosingPolicy] = weakref.WeakValueDictionary()
    _owned: weakref.WeakKeyDictionary[Any, dict[int, ClosingPolicy]] = weakref.WeakKeyDictionary()
    _owners: dict[int, weakref.ref[Any]] = {}
    # Policies of tokenizers nobody registered (grammar checks without a model): a few kept.
    _unowned: deque[ClosingPolicy] = deque(maxlen=UNOWNED_POLICIES)
    _lock = threading.Lock()

    def __init__(self, tokenizer: llguidance.LLTokenizer) -> None:
        self.tokenizer = tokenizer
        self.n_words = (tokenizer.vocab_size + 31) // 32
        self.texts = [tokenizer.decode_bytes([t]) for t in range(tokenizer.vocab_size)]
        texts = self.texts
        self.lengths = np.array([len(b) if b else 1 << 20 for b in texts], np.int64)
        blank = np.array([not b.strip() for b in texts])
        self.lengths[blank] += 1 << 10  # whitespace only: tried last
        for t in tokenizer.eos_tokens:
            self.lengths[t] = 1 << 20
        # Every token, shortest first (ties by id): the walk's candidates are the first
        # allowed ones, found without sorting the vocabulary at each step.
        self.by_length = np.argsort(self.lengths, kind="stable")
        structural = [t for t, b in enumerate(texts) if _structural(b)]
        by_text = {b: t for t, b in enumerate(texts) if b in _VALUES}
        structural += [by_text[v] for v in _VALUES if v in by_text]
        self.structural = np.array(sorted(set(structural)), np.int64)
        # Tails of short formatted values, fewest tokens first. The quote that follows one
        # is checked with it but left to the greedy step, which may fold it into `"}`.
        self.quote = tokenizer.tokenize_bytes(b'"')
        tails = {tuple(tokenizer.tokenize_str(t)) for t in value_tails()}
        self.tails = [list(t) for t in sorted(tails, key=lambda t: (len(t), _size(texts, t)))]
        # Digit strings to end a number with, shortest first; and what may follow one.
        digits = [f"{n:0{width}d}" for width in range(1, NUMBER_TAIL + 1) for n in range(10**width)]
        self.digit_tails = [tokenizer.tokenize_str(d) for d in digits]
        self.number_ends = [tokenizer.tokenize_bytes(e) for e in _NUMBER_ENDS]
        self.number_ends += [[t] for t in tokenizer.eos_tokens]

    @classmethod
    def for_tokenizer(cls, tokenizer: llguidance.LLTokenizer) -> ClosingPolicy:
        """The policy for `tokenizer`, built once (~0.1 s for a 49k vocabulary)."""
        with cls._lock:
            found = cls._live.get(id(tokenizer))
            if found is not None and found.tokenizer is tokenizer:
                return found
            policy = cls._live[id(tokenizer)] = cls(tokenizer)
            ref = cls._owners.get(id(tokenizer))
            owner = ref() if ref is not None else None
            if owner is not None:
                cls._owned.setdefault(owner, {})[id(tokenizer)] = policy
            else:
                cls._unowned.append(policy)
            return policy

    @classmethod
    def remember(cls, owner: Any, tokenizer: llguidance.LLTokenizer) -> None:
        """`owner` (weakly referenceable: a model's tokenizer) owns `tokenizer`: the policy
        built for it is kept while `owner` lives and let go with it."""
        key = id(tokenizer)

        def forget(_: weakref.ref[Any]) -> None:
            with cls._lock:
                if cls._owners.get(key) is ref:
                    del cls._owners[key]

        ref = weakref.ref(owner, forget)
        with cls._lock:
            cls._owners[key] = ref
            found = cls._live.get(key)
            if found is not None and found.tokenizer is tokenizer:
                cls._owned.setdefault(owner, {})[key] = found

    def ending(
        self,
        matcher: LLMatcher,
        limit: int,
        nesting: Nesting | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[int] | None:
        """Tokens that take `matcher`'s state (not changed: a copy walks) to one the grammar
        accepts; [] if it accepts already; None if no ending shows within `limit` tokens
        or `cancelled()` turns true on the way (a long walk takes about 1 ms a token).
        `nesting` is the reply's text so far, seen lexically (not changed)."""
        walk = matcher.deep_copy()
        nest = nesting.copy() if nesting is not None else Nesting()
        words = np.zeros(self.n_words, np.int32)
        out: list[int] = []
        # The string tails were last tried in (forced text can close one string and open
        # the next in a single step: `","date":"`).
        tried = -1
        number_tried = False  # the digit tails were tried on the number the text ends in
        while True:
            if walk.is_error():
                return None
            if walk.is_accepting():
                return out
            if walk.is_stopped() or len(out) > limit:
                return None
            if cancelled is not None and len(out) % CANCEL_EVERY == 0 and cancelled():
                return None
            forced = walk.compute_ff_tokens()
            if forced:
                if not walk.consume_tokens(forced):
                    return None
                out += forced
                for token in forced:
                    nest.feed(self.texts[token])
                continue
            if nest.in_string and tried != nest.strings and not nest.escaped:
                tried = nest.strings
                tail = self._tail(walk)
                if tail:
                    if not walk.consume_tokens(tail):
                        return None
                    out += tail
                    for token in tail:
                        nest.feed(self.texts[token])
                    continue
            if nest.in_number and not number_tried:
                number_tried = True
                tail = self._number_tail(walk)
                if tail:
                    if not walk.consume_tokens(tail):
                        return None
                    out += tail
                    for token in tail:
                        nest.feed(self.texts[token])
                    continue
            elif not nest.in_number:
                number_tried = False
            walk.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
            chosen = self._choose(walk, words, nest)
            if chosen is None or not walk.consume_token(chosen):
                return None
            out.append(chosen)
            nest.feed(self.texts[chosen])

    def _tail(self, walk: LLMatcher) -> list[int] | None:
        """The fewest tokens, the tail of a short formatted value (`formats`), after which
        the quote may end the string the walk is in, when the quote may not end it now;
        the matcher decides (not changed: it only checks). None if no tail does."""
        if walk.validate_tokens(self.quote) == len(self.quote):
            return None  # the quote closes it: the greedy step will
        for tail in self.tails:
            closed = tail + self.quote
            if walk.validate_tokens(closed) == len(closed):
                return tail
        return None

    def _number_tail(self, walk: LLMatcher) -> list[int] | None:
        """The fewest digits after which the number the walk is in may end (a `multipleOf`
        that the digits so far miss: `1` + `32` for a multiple of 44), when it may not end
        now; the matcher decides (not changed). None if it may end now, or no tail of up
        to NUMBER_TAIL digits lets it."""
        if any(walk.validate_tokens(end) == len(end) for end in self.number_ends):
            return None
        for tail in self.digit_tails:
            if walk.validate_tokens(tail) != len(tail):
                continue
            for end in self.number_ends:
                ended = tail + end
                if walk.validate_tokens(ended) == len(ended):
                    return tail
        return None

    def _shortest(self, words: np.ndarray) -> np.ndarray:
        """The CANDIDATES shortest tokens `words` allow (ties by id), read in length order a
        chunk at a time: a mask allowing a few short tokens is answered from the first
        chunk, not by sorting the vocabulary (25-40 ms a walk step at 262k tokens)."""
        u32 = words.view(np.uint32)
        found: list[np.ndarray] = []
        have, start, chunk = 0, 0, 2048
        order = self.by_length
        while have < CANDIDATES and start < order.size:
            tokens = order[start : start + chunk]
            hit = tokens[((u32[tokens >> 5] >> (tokens & 31).astype(np.uint32)) & 1) != 0]
            found.append(hit)
            have += hit.size
            start += chunk
            chunk *= 4
        return np.concatenate(found)[:CANDIDATES] if found else order[:0]

    def _choose(self, walk: LLMatcher, words: np.ndarray, nest: Nesting) -> int | None:
        """The allowed token that leaves the text least deep; among equals, the one after
        which the grammar accepts or forces text, then the shortest."""
        shortest = self._shortest(words)
        if not shortest.size:
            return None
        u32 = words.view(np.uint32)
        structural = self.structural
        known = structural[((u32[structural >> 5] >> (structural & 31).astype(np.uint32)) & 1) != 0]
        candidates = list(dict.fromkeys(int(t) for t in (*shortest, *known)))
        depths = [nest.depth_after(self.texts[t]) for t in candidates]
        least = min(depths)
        tied = [t for t, d in zip(candidates, depths, strict=True) if d == least]
        if len(tied) == 1:
            return tied[0]
        best, best_rank = None, (3, 0)
        for token in tied[:CANDIDATES]:
            if not walk.consume_token(token):
                return None  # an allowed token was refused: the walk gives up
            score = 0 if walk.is_accepting() else 1 if walk.compute_ff_tokens() else 2
            walk.rollback(1)
            rank = (score, int(self.lengths[token]))
            if best is None or rank < best_rank:
                best, best_rank = token, rank
        return best


def _size(texts: list[bytes], tokens: tuple[int, ...]) -> int:
    return sum(len(texts[t]) for t in tokens)


def _structural(text: bytes) -> bool:
    """Text made only of quotes and brackets (`"`, `}`, `"]]`, `{`): candidates that end or
    open a structure."""
    return bool(text) and len(text) <= 4 and all(c in b'"{}[]' for c in text)


class RepetitionDetector:
    """Whether the newest tokens repeat a unit of 1-`max_period` tokens often enough to be
    a loop (at least `min_span` tokens and `min_repeats` repeats) inside one value: read
    lexically, the unit neither opens nor closes a string or a bracket."""

    def __init__(
        self,
        texts: list[bytes],
        *,
        max_period: int = 16,
        min_span: int = 24,
        min_repeats: int = 4,
    ) -> None:
        self._texts = texts
        self._recent: deque[int] = deque(maxlen=max_period)
        self._runs = [0] * (max_period + 1)  # run[p]: tokens in a row equal to the one p back
        self._needed = [0] + [
            max(min_span - p, (min_repeats - 1) * p) for p in range(1, max_period + 1)
        ]

    def feed(self, tokens: Iterable[int], nesting: Nesting) -> bool:
        """Add the reply's newest tokens (`nesting`: the reply's text so far, them
        included); True if the reply now ends in a loop inside one value."""
        recent, runs = self._recent, self._runs
        for token in tokens:
            for p in range(1, len(runs)):
                runs[p] = runs[p] + 1 if len(recent) >= p and recent[-p] == token else 0
            recent.append(token)
        for p in range(1, len(runs)):
            if runs[p] >= self._needed[p]:
                unit = b"".join(self._texts[t] for t in list(recent)[-p:] if t < len(self._texts))
                if _stays_inside(nesting, unit):
                    return True
        return False


def _stays_inside(nesting: Nesting, text: bytes) -> bool:
    """Whether `text`, read from `nesting`'s state, stays inside the same string (or out of
    every string) and opens or closes no bracket."""
    twin = nesting.copy()
    depth, in_string = len(twin.stack), twin.in_string
    for c in text:
        twin.feed(bytes((c,)))
        if twin.in_string != in_string or len(twin.stack) != depth:
            return False
    return True


@dataclass
class Closing:
    """What the tracker did, for the reply's statistics."""

    reason: str = ""  # "budget" or "repetition" once the reply was closed
    tokens: int = 0  # tokens of the ending it followed
    checks: int = 0  # endings computed
    needed: int | None = None  # the last ending's length; -1 if none was found in reach


class ClosingTracker:
    """When one reply computes its ending and when it follows it (see the module doc)."""

    def __init__(
        self,
        tokenizer: llguidance.LLTokenizer | ClosingPolicy,
        max_tokens: int,
        *,
        repetition: bool = True,
        margin: int = MARGIN,
        cancelled: Callable[[], bool] | None = None,
    ) -> None:
        policy = (
            tokenizer
            if isinstance(tokenizer, ClosingPolicy)
            else ClosingPolicy.for_tokenizer(tokenizer)
        )
        self.policy = policy
        self.max_tokens = max_tokens
        self.margin = margin
        self.state = Closing()
        self._next_check = max(0, max_tokens - max(FIRST_CHECK, max_tokens // 2))
        self._repeats = RepetitionDetector(policy.texts) if repetition else None
        self._nesting = Nesting()
        self._cancelled = cancelled
        self._longest = 0  # the longest ending any check found
        self._lookahead = LOOKAHEAD  # how far past the budget a walk goes

    def after(self, matcher: LLMatcher, tokens: list[int], generated: int) -> list[int] | None:
        """`matcher` has consumed the reply's newest `tokens`; the reply now holds
        `generated` tokens. The tokens to end it with now ([] to stop here), or None."""
        texts = self.policy.texts
        for token in tokens:
            if token < len(texts):
                self._nesting.feed(texts[token])
        looping = self._repeats is not None and self._repeats.feed(tokens, self._nesting)
        if (generated < self._next_check and not looping) or matcher.is_stopped():
            return None
        left = self.max_tokens - generated
        self.state.checks += 1
        ending = self.policy.ending(matcher, left + self._lookahead, self._nesting, self._cancelled)
        if ending is None:
            # Out of reach (a long minLength string, say): each walk costs about a mask per
            # token and stalls the reply's row, so look again less often and no further
            # than the budget (how far past it an ending lies is known by now).
            self.state.needed = -1
            self._lookahead = 0
            self._next_check = generated + max(1, left // 2)
            return None
        self.state.needed = len(ending)
        # An ending's length swings with where the reply is (between two items a bracket
        # or two; inside a date-time string most of a date), and can outgrow what is left
        # between two checks. So the slack is kept against the longest ending seen so far,
        # while the ending followed is the current one.
        self._longest = max(self._longest, len(ending))
        slack = left - self._longest - self.margin
        if len(ending) <= left and (looping or slack <= 0):
            self.state.reason = "repetition" if looping and slack > 0 else "budget"
            self.state.tokens = len(ending)
            return ending
        self._next_check = generated + max(1, slack // 2)
        return None
