"""Finishing a constrained reply within its budget: the reserve, steering, and the fit.

A reply under a constraint with `max_tokens` has a budget; the closing policy's walk
(`engine.constraints.closing`) says how many tokens its grammar still needs from where it
stands (the shortest valid ending it finds). `ClosingTracker` keeps those tokens in
reserve and turns the reply toward its end before the budget is gone, leaving the model
to choose how it ends:

- Far from the end nothing changes, and the ending is computed rarely: first when half
  the budget (or FIRST_CHECK tokens) remains, then whenever half of the slack left at the
  last check is used up. The slack is what is left beyond the longest ending seen so far
  and MARGIN tokens kept in hand (an ending's length swings with where the reply is).
- When the slack falls to the reserve (RESERVE tokens, or twice the ending if more), the
  reply wraps up: steering (`engine.constraints.steering`, WRAP) masks out what opens new
  content where the structure may close instead (another item, an optional key, a
  nested object); when it falls to TIGHT, strings and numbers end too (TIGHT). The model
  picks every token; the reply is finished by the model.
- When no slack is left, the reply is fitted, and that is the closing: from then on each
  token is still the model's own pick (its sampler, one forward pass a token), but only
  among the allowed tokens after which an ending still fits in what is left, each checked
  with the walk (the walk's own next token always fits). The reply is `closed_to_fit`,
  its values from there on held to fit, but they are the model's likeliest under that
  mask rather than the walk's placeholders (`2000-01-01`, `0`).
- When the reply repeats itself inside a value (`RepetitionDetector`), steering moves it
  on (MOVE_ON): the string or number it loops in ends, or the array it loops in closes,
  and the model goes on from there. Where the grammar allows no way out yet (a pattern
  or `minLength` unmet), the value is fitted with no slack: closed, reason "repetition".

Steering reads the reply as JSON (`steer=False` for other grammars, whose text a lexical
reading may misjudge): without it the reserve only computes and a loop is fitted at once.
A decode loop calls `after` on the mask thread each time the matcher has consumed the
reply's newest tokens (it returns tokens to end the reply with now: [] when the grammar
accepts and the reply must stop there), then `narrow` with the grammar's mask for the
next token; `began` tells it when the closing began.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import llguidance
import numpy as np
from llguidance import LLMatcher

from engine.constraints.closing import (
    FIRST_CHECK,
    LOOKAHEAD,
    MARGIN,
    ClosingPolicy,
    Nesting,
    RepetitionDetector,
)
from engine.constraints.steering import Mode, Steer, TokenClasses, steer

RESERVE = 24  # slack at which the reply wraps up (or twice the ending, if more)
TIGHT = 8  # slack at which strings and numbers end too
FIT_SHORTEST = 12  # the shortest allowed tokens tried as a fitted reply's next token ...
FIT_STRUCTURAL = 6  # ... and the quote-and-bracket tokens

_classes: weakref.WeakKeyDictionary[ClosingPolicy, TokenClasses] = weakref.WeakKeyDictionary()
_classes_lock = threading.Lock()


def token_classes(policy: ClosingPolicy) -> TokenClasses:
    """The steering classes of `policy`'s tokenizer, built once (they live as long as it)."""
    with _classes_lock:
        found = _classes.get(policy)
    if found is None:
        found = TokenClasses(policy.texts, policy.n_words)
        with _classes_lock:
            found = _classes.setdefault(policy, found)
    return found


@dataclass
class Closing:
    """What the tracker did, for the reply's statistics."""

    reason: str = ""  # "budget" or "repetition" once the closing began
    tokens: int = 0  # tokens from where the closing began (while it runs: those expected)
    checks: int = 0  # endings computed
    needed: int | None = None  # the last ending's length; -1 if none was found in reach
    steered: int = 0  # tokens picked under a narrowed mask before any closing
    moved_on: int = 0  # loops inside a value the reply was steered out of


class ClosingTracker:
    """When one reply computes its ending, steers, and is fitted (see the module doc)."""

    def __init__(
        self,
        tokenizer: llguidance.LLTokenizer | ClosingPolicy,
        max_tokens: int,
        *,
        repetition: bool = True,
        steering: bool = True,
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
        self.began = False  # the closing began at the last `after` or `narrow`
        self._classes = token_classes(policy) if steering else None
        self._next_check = max(0, max_tokens - max(FIRST_CHECK, max_tokens // 2))
        self._repeats = RepetitionDetector(policy.texts) if repetition else None
        self._nesting = Nesting()
        self._cancelled = cancelled
        self._longest = 0  # the longest ending any check found
        self._lookahead = LOOKAHEAD  # how far past the budget a walk goes
        self._generated = 0
        self._item_start: int | None = None  # where the array item being written began
        self._longest_item = 0  # the most tokens an array item took
        self._mode: Mode | None = None  # WRAP or TIGHT once the reserve is reached
        # the value a loop is being steered out of: ("string", which string), ("number",
        # 0) or ("container", its depth)
        self._moving: tuple[str, int] | None = None
        self._fit_from: int | None = None  # tokens the reply held when the closing began
        self._deadline = max_tokens  # the reply ends by this many tokens once fitted
        self._plan: list[int] | None = None  # a valid ending that fits, while fitted
        self._paths: dict[int, list[int]] = {}  # the next tokens allowed, with their endings

    @property
    def fitting(self) -> bool:
        """The closing began: each token is held to fit."""
        return self._fit_from is not None

    def after(self, matcher: LLMatcher, tokens: list[int], generated: int) -> list[int] | None:
        """`matcher` has consumed the reply's newest `tokens`; the reply now holds
        `generated` tokens. Tokens to end it with now ([] to stop here), or None."""
        self.began = False
        self._generated = generated
        texts, nest = self.policy.texts, self._nesting
        for i, token in enumerate(tokens):
            items = nest.items
            if token < len(texts):
                nest.feed(texts[token])
            if nest.items != items:  # an array item begins: how long was the last one?
                at = generated - len(tokens) + i + 1
                if self._item_start is not None:
                    self._longest_item = max(self._longest_item, at - self._item_start)
                self._item_start = at
        looping = self._repeats is not None and self._repeats.feed(tokens, self._nesting)
        if looping and self._repeats is not None:
            self._repeats.reset()
        if self._fit_from is not None:
            return self._fit_after(matcher, tokens, generated, looping)
        if matcher.is_stopped():
            return None
        if looping:
            if self._classes is None:
                return self._fit_loop(matcher, generated)
            self._moving = self._loop_site()
            self.state.moved_on += 1
        if generated < self._next_check:
            return None
        return self._check(matcher, generated)

    def narrow(self, matcher: LLMatcher, words: np.ndarray) -> None:
        """Narrow `words` (the grammar's packed mask for the next token, uint32, changed in
        place) by what the tracker is doing: fitting, moving on from a loop, or wrapping up."""
        if self._fit_from is not None:
            self._fit_narrow(matcher, words)
            return
        classes = self._classes
        if classes is None:
            return
        if self._moving is not None and not self._still_moving():
            self._moving = None
        if self._moving is not None:
            mode = Mode.WRAP if self._moving[0] == "container" else Mode.MOVE_ON
            found = steer(words, self._nesting, mode, classes, self._last(matcher))
            if found is Steer.REFUSED:
                self._moving = None
                self._fit_loop(matcher, self._generated)
                if self.fitting:  # (an empty plan leaves only the end tokens)
                    self._fit_narrow(matcher, words)
                return
            self.state.steered += found is Steer.NARROWED
            return
        if self._mode is not None:
            found = steer(words, self._nesting, self._mode, classes, self._last(matcher))
            self.state.steered += found is Steer.NARROWED

    def _last(self, matcher: LLMatcher) -> Callable[[], bool]:
        """Whether the string the reply is in may end its container (`"}`, `"]`)."""

        def last() -> bool:
            stack = self._nesting.stack
            if not stack:
                return True
            ending = self.policy.string_last[stack[-1]]
            return bool(matcher.validate_tokens(ending) == len(ending))

        return last

    # ---- the reserve ----

    def _check(self, matcher: LLMatcher, generated: int) -> list[int] | None:
        """Compute the ending; begin the closing if the slack is gone, else set the
        steering mode for what is left and when to look again."""
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
        if len(ending) <= left and slack <= 0:
            return self._begin(ending, generated, "budget", self.max_tokens)
        # room for an ending twice as long as the one needed (values longer than the
        # walk's), and for one more array item, the longest written so far
        reserve = max(RESERVE, 2 * self._longest, self._longest_item + TIGHT)
        below = 0
        if self._classes is not None:
            self._mode = Mode.TIGHT if slack <= TIGHT else Mode.WRAP if slack <= reserve else None
            below = 0 if self._mode is Mode.TIGHT else TIGHT if self._mode else reserve
        self._next_check = generated + max(1, (slack - below) // 2)
        return None

    # ---- loops ----

    def _loop_site(self) -> tuple[str, int]:
        """What a loop found now is inside: the string, the number, or the container."""
        nest = self._nesting
        if nest.in_string:
            return ("string", nest.strings)
        unit = self._repeats.unit if self._repeats is not None else b""
        if nest.in_number and unit and all(c in b"0123456789" for c in unit):
            return ("number", 0)
        return ("container", len(nest.stack))

    def _still_moving(self) -> bool:
        assert self._moving is not None
        kind, where = self._moving
        nest = self._nesting
        if kind == "string":
            return nest.in_string and nest.strings == where
        if kind == "number":
            return nest.in_number
        return len(nest.stack) >= where and bool(nest.stack)

    def _fit_loop(self, matcher: LLMatcher, generated: int) -> list[int] | None:
        """A loop with no way out but filling: fit the reply with no slack."""
        self.state.checks += 1
        left = self.max_tokens - generated
        ending = self.policy.ending(matcher, left, self._nesting, self._cancelled)
        if ending is None or len(ending) > left:
            return None  # nothing fits: the reply goes on (the budget may still close it)
        return self._begin(ending, generated, "repetition", generated + len(ending))

    # ---- the fit ----

    def _begin(
        self, plan: list[int], generated: int, reason: str, deadline: int
    ) -> list[int] | None:
        """The closing begins with `plan`, a valid ending; the reply ends by `deadline`."""
        self._fit_from = generated
        self._deadline = deadline
        self._plan = plan
        self._paths = {}
        self._mode = self._moving = None
        self.began = True
        self.state.reason = reason
        self.state.tokens = len(plan)
        return [] if not plan else None

    def _fit_after(
        self, matcher: LLMatcher, tokens: list[int], generated: int, looping: bool
    ) -> list[int] | None:
        """The plan after the reply's newest tokens: the shorter of a fresh walk and the
        ending the tokens' own check found; [] once the grammar accepts. A reply that
        loops while fitted loses its slack."""
        left = self._deadline - generated
        known = self._paths.get(tokens[0]) if tokens else None
        if known is not None and known[: len(tokens) - 1] == tokens[1:]:
            known = known[len(tokens) - 1 :]
        else:
            known = None
        self.state.checks += 1
        fresh = self.policy.ending(matcher, max(0, left), self._nesting, self._cancelled)
        options = [p for p in (fresh, known) if p is not None and len(p) <= left]
        assert self._fit_from is not None
        if not options:
            self._plan = None  # no ending fits any more: the budget cuts the reply
            self.state.needed = -1
            return None
        plan = min(options, key=len)
        if looping:
            self._deadline = generated + len(plan)
        self._plan = plan
        self.state.needed = len(plan)
        self.state.tokens = generated - self._fit_from + len(plan)
        return [] if not plan else None

    def _fit_narrow(self, matcher: LLMatcher, words: np.ndarray) -> None:
        """Keep, of the allowed tokens, those after which an ending still fits: the plan's
        next token, and of the shortest and the quote-and-bracket ones those a walk
        proves (the model picks among them)."""
        plan = self._plan
        if plan is None:
            return
        policy = self.policy
        left = self._deadline - self._generated
        paths: dict[int, list[int]] = {}
        if plan:
            paths[plan[0]] = plan[1:]
        if self._classes is not None:  # strings and numbers end where they may
            steer(words, self._nesting, Mode.TIGHT, self._classes, self._last(matcher))
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: policy.lengths.size]
        allowed = np.flatnonzero(bits)
        if allowed.size > FIT_SHORTEST:
            nearest = np.argpartition(policy.lengths[allowed], FIT_SHORTEST)[:FIT_SHORTEST]
            shortest = allowed[nearest]
        else:
            shortest = allowed
        structural = policy.structural[bits[policy.structural] != 0][:FIT_STRUCTURAL]
        candidates = dict.fromkeys(int(t) for t in (*shortest, *structural))
        for token in candidates:
            if token in paths or policy.lengths[token] >= 1 << 20:  # an end token
                continue
            if self._cancelled is not None and self._cancelled():
                break
            twin = matcher.deep_copy()
            if not twin.consume_token(token):
                continue
            forced = twin.compute_ff_tokens()
            if forced and not twin.consume_tokens(forced):
                continue
            nest = self._nesting.copy()
            for t in (token, *forced):
                nest.feed(policy.texts[t])
            rest = policy.ending(twin, left - 1 - len(forced), nest, self._cancelled)
            self.state.checks += 1
            if rest is not None and 1 + len(forced) + len(rest) <= left:
                paths[token] = forced + rest
        self._paths = paths
        words[:] = 0
        for token in paths:
            words[token >> 5] |= np.uint32(1 << (token & 31))
