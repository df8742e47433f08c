"""Speculative decoding: guess a row's next tokens, verify them in the row's own step.

A speculating row feeds, in one forward pass, the token it knows next plus a draft of the
tokens it expects after it (`engine.runtime.batch`). The logits of every fed position then say
which draft tokens the model itself would have produced: the agreeing prefix is kept, the
first disagreement is replaced by the model's own token, and the rest is dropped from the
KV cache (`rollback_cache`) as if it had never been fed.

Drafts come from prompt lookup (`PromptLookup`: the tokens that followed the latest earlier
occurrence of the reply's last few tokens, in the prompt or the reply) or from a small
draft model with the same tokenizer (`DraftModel`). Under a constraint the grammar checks a
draft before the model does (`RowConstraint.validate`), so only a valid prefix is fed.

Exactness. Every reply token is drawn with a key fixed by the reply's seed and the token's
position (`engine.runtime.sampling.RowSampler`), so the model's token at a position is the same
whether or not a draft was fed there. A draft token is accepted exactly when it equals that
token. Drafts are deterministic (q is a point mass at the draft token d), for which the
standard speculative rule (accept with probability min(1, p(d)/q(d)) = p(d), otherwise draw
from the normalised residual max(0, p - q), that is p without d) is this very coupling: the
output has the target distribution p, and with a seed it is token for token the reply
decoding without speculation gives (greedy: the argmax, identical).

Adaptivity (`Speculator`). The draft length follows the row's recent acceptance (the
expected tokens per pass for a draft of k tokens at acceptance a, (1 - a^(k+1)) / (1 - a),
against what a pass k tokens wider costs, learnt from the batch's own step times:
`PassCost`). When no length pays, drafting stops for a while and the row goes back to the
pipelined single-token loop, then tries again, backing off further each time it fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import mlx.core as mx

from engine.memory.prompt_cache import trim_cache
from engine.memory.store import common_prefix

# Longest draft fed in one pass.
MAX_DRAFT = 8
# The n-gram sizes prompt lookup matches, longest first.
LOOKUP_NGRAMS = (3, 2, 1)
# Passes a row decodes without drafting after drafting stopped paying, at first; doubled
# on each further failure up to the maximum.
PAUSE_STEPS = 16
MAX_PAUSE_STEPS = 512
# A draft of k tokens must promise this much more than a plain pass to be fed.
MIN_GAIN = 1.1
# A match of a single token is a weak guess: its draft is cut to this many tokens.
SHORT_MATCH_DRAFT = 2


class Drafter(Protocol):
    """Proposes the tokens expected after a row's context."""

    def propose(self, context: list[int], k: int) -> list[int]:
        """Up to `k` tokens expected to follow `context` (prompt and reply so far)."""
        ...

    def release(self) -> None:
        """The row ended: let go of what the drafter holds for it."""
        ...


class PromptLookup:
    """Prompt-lookup drafting: match the context's last n tokens (n from the longest of
    LOOKUP_NGRAMS) against earlier text and propose what followed their latest occurrence
    (or their first, when too little follows the latest: inside a repeating run the latest
    occurrence overlaps the end).

    The context only ever grows by accepted tokens, so the index from each n-gram to where
    it occurs is kept up to date incrementally (O(new tokens) per proposal)."""

    def __init__(self, ngrams: tuple[int, ...] = LOOKUP_NGRAMS) -> None:
        self.ngrams = tuple(sorted(ngrams, reverse=True))
        self._first: dict[tuple[int, ...], int] = {}  # n-gram -> end of its first occurrence
        self._latest: dict[tuple[int, ...], int] = {}  # ... and of its latest
        self._indexed = 0  # n-grams ending at or before this position are indexed
        self._context: list[int] = []

    def propose(self, context: list[int], k: int) -> list[int]:
        """Up to `k` tokens that followed an earlier occurrence of the longest matching
        suffix of `context`."""
        if k <= 0 or len(context) < 2:
            return []
        if self._context[: self._indexed] != context[: self._indexed]:
            self.release()  # not an extension of the context indexed: start over
        self._context = context
        # Index every n-gram ending before the last position (a match must lie earlier).
        end = len(context) - 1
        for e in range(self._indexed + 1, end + 1):
            for n in self.ngrams:
                if e >= n:
                    gram = tuple(context[e - n : e])
                    self._first.setdefault(gram, e)
                    self._latest[gram] = e
        self._indexed = max(self._indexed, end)
        for n in self.ngrams:
            if len(context) <= n:
                continue
            gram = tuple(context[-n:])
            at = self._latest.get(gram)
            if at is None:
                continue
            if len(context) - at < k:
                at = self._first[gram]
            return context[at : at + (k if n > 1 else min(k, SHORT_MATCH_DRAFT))]
        return []

    def release(self) -> None:
        self._first, self._latest, self._indexed, self._context = {}, {}, 0, []


class DraftModel:
    """Drafts with a small model sharing the main model's tokenizer: greedy, one token per
    pass of the draft model, with its own KV cache kept equal to the row's accepted tokens.

    The cache starts from the draft model's prompt cache (its longest cached prefix) and
    goes back to it when the row ends (`release`)."""

    def __init__(self, model: Any, store: Any | None = None) -> None:
        self.model = model
        self.store = store
        self.cache: list[Any] | None = None
        self.fed: list[int] = []

    def _sync(self, context: list[int]) -> None:
        """Make the draft cache hold exactly `context[:-1]` (its last token is fed next)."""
        target = context[:-1]
        if self.cache is None:
            if self.store is not None:
                self.cache, n = self.store.fetch(self.model, target)
                self.fed = list(target[:n])
            else:
                from mlx_lm.models.cache import make_prompt_cache

                self.cache, self.fed = make_prompt_cache(self.model), []
        common = common_prefix(self.fed, target)
        if common < len(self.fed):
            trim_cache(self.cache, len(self.fed) - common)
            del self.fed[common:]
        rest = target[len(self.fed) :]
        if rest:
            self.model(mx.array(rest)[None], cache=self.cache)
            self.fed.extend(rest)

    def propose(self, context: list[int], k: int) -> list[int]:
        """`k` tokens the draft model picks greedily after `context`."""
        if k <= 0 or not context:
            return []
        self._sync(context)
        assert self.cache is not None
        token = context[-1]
        out: list[int] = []
        for _ in range(k):
            logits = self.model(mx.array([[token]]), cache=self.cache)
            self.fed.append(token)
            token = cast(int, mx.argmax(logits[0, -1]).item())
            out.append(token)
        return out

    def release(self) -> None:
        """Give the draft cache back to the draft model's prompt cache."""
        if self.cache is not None and self.store is not None:
            try:  # after a failed pass of the draft model its cache cannot be computed
                mx.eval([c.state for c in self.cache])
            except Exception:
                self.cache = None
            if self.cache is not None:
                self.store.store(list(self.fed), self.cache)
        self.cache, self.fed = None, []


class PassCost:
    """How much longer a forward pass feeding w tokens per row takes than one feeding one
    token, learnt from one decode batch's step times (an exponential average per width).

    Until a width has been timed it is assumed cheap (as on a GPU), so drafting is tried;
    the timings then decide (on a CPU a pass costs about w times one token with quantized
    weights, and drafting switches itself off). With `learn` False the timings are kept but
    not used: every width stays assumed cheap, so whether a row drafts depends on its
    drafts' acceptance alone, the same on any machine under any load (what tests of
    drafting need; `Engine(learn_pass_cost=False)`)."""

    def __init__(self, *, learn: bool = True) -> None:
        self._seconds: dict[tuple[int, int], float] = {}
        self.learn = learn

    def record(self, shape: tuple[int, int], seconds: float) -> None:
        """A step of `shape` (rows, tokens fed to the widest row) took `seconds` (from its
        start to the next step's: other work between steps is clipped as an outlier)."""
        old = self._seconds.get(shape)
        if old is None:
            self._seconds[shape] = seconds
        else:
            self._seconds[shape] = 0.8 * old + 0.2 * min(seconds, 3 * old)

    def relative(self, rows: int, width: int) -> float:
        """The cost of a step of `rows` rows feeding `width` tokens, in steps feeding one."""
        if width <= 1:
            return 1.0
        one = self._seconds.get((rows, 1))
        known = self._seconds.get((rows, width))
        if not self.learn or one is None or known is None:
            return 1.0 + 0.02 * (width - 1)
        return max(1.0, known / one)


@dataclass
class SpecStats:
    """One reply's speculation figures."""

    drafted: int = 0  # draft tokens fed to the model
    accepted: int = 0  # of which the model agreed with
    passes: int = 0  # forward passes that verified a draft

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0


class Speculator:
    """One row's drafting: its drafter, how long a draft to feed, and when to stop.

    Args:
        drafter: where drafts come from.
        room: how many more tokens the reply may have (its budget left).
        max_draft: the longest draft.
    """

    def __init__(
        self,
        drafter: Drafter,
        room: Callable[[], int],
        *,
        max_draft: int = MAX_DRAFT,
    ) -> None:
        self.drafter = drafter
        self.room = room
        self.max_draft = max_draft
        self.stats = SpecStats()
        self.rate = 0.5  # recent acceptance per draft token (a fair start)
        self.paused = 0  # passes left without drafting
        self._pause = PAUSE_STEPS
        self._failures = 0  # drafts in a row that did not pay
        self.drafted_at = 0.0  # perf_counter() when the latest draft was made

    @property
    def active(self) -> bool:
        """Drafting now (the row reads its tokens at once, to draft after them)."""
        return self.paused == 0

    def wait(self) -> None:
        """A pass without drafting (paused, or the batch cannot drop rejected positions)."""
        self.paused = max(0, self.paused - 1)

    def length(self, cost: PassCost, rows: int) -> int:
        """The draft length expected to give the most tokens per unit of time, 0 if none
        pays (then drafting pauses)."""
        room = min(self.max_draft, self.room() - 1)
        a = min(self.rate, 0.98)
        best, best_gain = 0, MIN_GAIN
        for k in range(1, room + 1):
            gain = (1 - a ** (k + 1)) / (1 - a) / cost.relative(rows, k + 1)
            if gain > best_gain:
                best, best_gain = k, gain
        return best

    def draft(
        self,
        context: list[int],
        cost: PassCost,
        rows: int,
        validate: Callable[[list[int]], int] | None = None,
    ) -> list[int]:
        """The draft to feed after `context` in a batch of `rows` rows: proposed, cut to
        what `validate` (the grammar) accepts. Empty when drafting does not pay (drafting
        pauses then)."""
        if self.room() <= 1:
            return []  # the budget has room for the model's own next token only
        k = self.length(cost, rows)
        if k == 0:
            self._stop()
            return []
        proposal = self.drafter.propose(context, k)
        if proposal and validate is not None:
            proposal = proposal[: validate(proposal)]
        self.drafted_at = time.perf_counter()
        return proposal

    def verified(self, drafted: int, accepted: int) -> None:
        """The model kept `accepted` of the `drafted` tokens fed."""
        if not drafted:
            return
        self.stats.drafted += drafted
        self.stats.accepted += accepted
        self.stats.passes += 1
        self.rate = 0.7 * self.rate + 0.3 * (accepted / drafted)

    def no_draft(self) -> None:
        """Nothing to propose this pass: a pass spent reading the token at once for nothing."""
        self._failures += 1
        if self._failures >= 8:
            self._stop()

    def _stop(self) -> None:
        self.paused = self._pause
        self._pause = min(self._pause * 2, MAX_PAUSE_STEPS)
        self._failures = 0
        self.rate = max(self.rate, 0.5)  # try again from a fair guess

    def paid(self) -> None:
        """A draft was (partly) accepted: drafting pays, reset the back-off."""
        self._failures = 0
        self._pause = PAUSE_STEPS


def rollback_cache(cache: list[Any], rejected: list[int], batched: bool) -> None:
    """Drop the last `rejected[i]` positions of row i from `cache` (one row's plain cache,
    or a batch cache of every row), as if they had never been fed.

    A batch cache holds rows at a common length: the positions every row drops are trimmed,
    and a row's further ones become left padding (mlx-lm's right-padding `finalize`)."""
    if not max(rejected, default=0):
        return
    if not batched:
        trim_cache(cache, rejected[0])
        return
    common = min(rejected)
    extra = [r - common for r in rejected]
    if max(extra):
        for c in cache:
            c.prepare(right_padding=extra)
            c.finalize()
    if common:
        trim_cache(cache, common)
