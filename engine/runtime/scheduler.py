"""Continuous batching on the engine thread: requests join the decoding rows as soon as
their prompts are ready, and leave the moment they end.

`Scheduler.run` serves until no request is left. Each turn of its loop:

1. admit queued requests while fewer than `max_rows` replies are in flight: build each
   prompt and start its constraint's compilation (`engine.runtime.reply.Reply`);
2. run one decode step for the rows decoding (`engine.runtime.batch.DecodeBatch`), and finish the
   rows that ended: each one's KV state goes back to the prompt cache with exactly its
   tokens, then its result is delivered;
3. prefill at most one chunk's worth of tokens (`PREFILL_CHUNK`) of the admitted prompts,
   oldest first, each starting from its longest cached prefix in the prompt cache. A
   prompt fully processed joins the batch once its grammar, if any, has its first mask
   (a reply alone joins at once).

So a new prompt never stalls the rows decoding for more than one prefill chunk, and
short prompts arriving together are all processed in one turn and start decoding
together. When a
prompt is done and another admitted prompt shares a long prefix with it (the `n`
alternatives of one request share all of it), its state is also left in the prompt cache,
sharing the buffers, so the next prompt starts from it instead of computing it again.
The KV state of the rows decoding is counted against the prompt cache's budget, and a
prompt waits while the batch could not hold its reply within that budget.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mlx.core as mx

from engine.errors import CorralError
from engine.memory.store import common_prefix
from engine.runtime.batch import DecodeBatch, DecodeRow, can_batch
from engine.runtime.context import KVMemory, annotate_error
from engine.runtime.prefill import PREFILL_CHUNK, feed
from engine.runtime.reply import Reply
from engine.runtime.speculative import Drafter, DraftModel, PassCost, PromptLookup
from engine.types import ChatResult, ErrorKind, GenerationStats, StopReason

if TYPE_CHECKING:
    from engine.library.load import LoadedModel
    from engine.memory.store import KVState, PromptCacheStore
    from engine.runtime.handle import RequestHandle

# A prompt sharing at least this many tokens with one that just finished prefilling starts
# from the latter's state (the trie keeps a shared copy for it).
SHARED_PREFIX_TOKENS = 16

Deliver = Callable[["RequestHandle", ChatResult], None]


@dataclass
class _Prompt:
    """An admitted reply whose prompt is not decoding yet."""

    reply: Reply
    cache: KVState | None = None  # fetched from the prompt cache when its prefill starts
    fed: list[int] = field(default_factory=list)
    started: bool = False
    ready: bool = False  # all of the prompt but its last token is in `cache`


class Scheduler:
    """The replies in flight for one model: admitted prompts and the decode batch."""

    def __init__(
        self,
        loaded: LoadedModel,
        prompt_cache: PromptCacheStore,
        *,
        max_rows: int,
        kv_budget_bytes: int | None,
        deliver: Deliver,
        speculative: bool = False,
        draft: tuple[LoadedModel, PromptCacheStore] | None = None,
        pass_cost: PassCost | None = None,
        kv_memory: KVMemory | None = None,
    ) -> None:
        """`deliver(handle, result)` finishes a request (after its cache is stored).
        `speculative`: replies draft tokens to verify (`engine.runtime.speculative`), with the
        `draft` model (and its prompt cache) if given, else by prompt lookup; `pass_cost`
        holds what wider steps cost on this model (learnt across schedulers); `kv_memory`
        (KV bytes per token and the budget) refuses a prompt whose KV cache cannot fit."""
        self.kv_memory = kv_memory
        self.loaded = loaded
        self.prompt_cache = prompt_cache
        self.max_rows = max(1, max_rows)
        self.kv_budget = kv_budget_bytes
        self.deliver = deliver
        # A sharded model's caches are mirrored on other machines: no trimming of its own.
        self.speculative = speculative and loaded.make_prompt_cache is None
        self.draft = draft
        self.batch = DecodeBatch(loaded.model, cost=pass_cost)
        self.prompts: deque[_Prompt] = deque()
        self._batchable = True  # the model's caches can be merged (learnt at the first prompt)
        self._token_bytes = 0  # KV bytes per token, learnt from the first prefilled prompt

    @property
    def in_flight(self) -> int:
        """Replies admitted and not finished."""
        return len(self.prompts) + self.batch.size

    def run(
        self,
        take: Callable[[], RequestHandle | None],
        take_cancelled: Callable[[], list[RequestHandle]],
    ) -> None:
        """Serve until nothing is in flight. `take()` gives the next queued request to
        admit, or None; `take_cancelled()` the queued requests cancelled while they wait,
        which finish at once."""
        while True:
            for cancelled in take_cancelled():
                self._admit(cancelled)  # finished at once
            while self.in_flight < self.max_rows and (handle := take()) is not None:
                self._admit(handle)
            if not self.in_flight and not self.batch.busy:
                return
            self._drop_cancelled()
            if self.batch.busy:
                self._decode_step()
            self._prefill_step()

    def fail_all(self, exc: BaseException) -> None:
        """Finish every reply in flight with `exc` (after a failure of the loop itself)."""
        for prompt in self.prompts:  # their prefixes were computed apart from the batch
            self._give_back(prompt.cache, prompt.fed)
        replies = [p.reply for p in self.prompts] + [
            row.owner for row in self._abandon_rows() if isinstance(row.owner, Reply)
        ]
        self.prompts.clear()
        for reply in replies:
            self.deliver(reply.handle, error_result(exc, reply.started))

    # ---- admitting and prefilling ----

    def _admit(self, handle: RequestHandle) -> None:
        started = time.perf_counter()
        if handle.cancelled:
            stats = GenerationStats(stop_reason=StopReason.CANCELLED.value)
            self.deliver(handle, ChatResult("", StopReason.CANCELLED, stats))
            return
        try:
            reply = Reply(self.loaded, handle, started, self.kv_memory)
        except Exception as exc:  # bad input must fail its request, never the engine
            self.deliver(handle, error_result(exc, started))
            return
        self.prompts.append(_Prompt(reply))

    def _drop_cancelled(self) -> None:
        """Finish admitted prompts cancelled while they wait or prefill."""
        for prompt in [p for p in self.prompts if p.reply.cancelled]:
            self.prompts.remove(prompt)
            self._finish(prompt.reply, StopReason.CANCELLED, prompt.cache, prompt.fed)

    def _prefill_step(self) -> None:
        """Up to one chunk of tokens of the prompts still prefilling, oldest first; join
        the prompts that are ready."""
        budget = PREFILL_CHUNK
        for prompt in [p for p in self.prompts if not p.ready]:
            if budget <= 0 or not (prompt.started or self._room_for(prompt)):
                break
            try:
                budget -= self._prefill_chunk(prompt, budget)
            except Exception as exc:
                self.prompts.remove(prompt)
                # the prefix lent by the prompt cache (and what was fed before the failure)
                # goes back to it: a failed request must not cost the next one its prefix
                self._give_back(prompt.cache, prompt.fed)
                prompt.cache = None
                self.deliver(prompt.reply.handle, error_result(exc, prompt.reply.started))
        for prompt in [p for p in self.prompts if p.ready]:
            if self._may_join(prompt):
                self.prompts.remove(prompt)
                assert prompt.cache is not None
                # no drafts for prompts with images: lookup would propose their key ids
                drafter = self._drafter() if prompt.reply.vision is None else None
                row = prompt.reply.row(prompt.cache, prompt.fed, drafter)
                self.batch.join(row)
                prompt.cache = None

    def _prefill_chunk(self, prompt: _Prompt, budget: int) -> int:
        """Feed up to `budget` more tokens of `prompt` (all of it but its last token, which
        the decode batch feeds); returns how many."""
        reply = prompt.reply
        tokens = reply.prompt_tokens
        if not prompt.started:  # from the longest cached prefix
            prompt.started = True
            prompt.cache, reply.n_cached = self.prompt_cache.fetch(self.loaded.model, tokens)
            prompt.fed = list(tokens[: reply.n_cached])
            self._batchable = self._batchable and can_batch(prompt.cache)
        assert prompt.cache is not None
        chunk = tokens[len(prompt.fed) : -1][:budget]
        if chunk:
            start = len(prompt.fed)
            inputs = reply.vision.inputs(start, start + len(chunk)) if reply.vision else {}
            feed(self.loaded.model, prompt.cache, chunk, prompt.fed, **inputs)
            reply.progress(len(prompt.fed))
        if len(prompt.fed) == len(tokens) - 1:
            prompt.ready = True
            if len(tokens) - reply.n_cached > PREFILL_CHUNK:
                mx.clear_cache()  # a long prompt's activations
            self._learn_token_bytes(prompt)
            self._share(prompt)
        return len(chunk)

    def _drafter(self) -> Drafter | None:
        if not self.speculative:
            return None
        if self.draft is not None:
            return DraftModel(self.draft[0].model, self.draft[1])
        return PromptLookup()

    def _may_join(self, prompt: _Prompt) -> bool:
        if not self.batch.size:
            return True  # alone: the first step waits for the grammar if need be
        if not self._batchable:
            return False
        constraint = prompt.reply.row_constraint
        return constraint is None or constraint.ready

    def _share(self, done: _Prompt) -> None:
        """Leave `done`'s state in the prompt cache for admitted prompts that share most of it."""
        tokens = done.reply.prompt_tokens
        for other in self.prompts:
            if other is done or other.started:
                continue
            if common_prefix(tokens, other.reply.prompt_tokens) >= SHARED_PREFIX_TOKENS:
                assert done.cache is not None
                self.prompt_cache.store_copy(list(done.fed), done.cache)
                return

    # ---- memory ----

    def _learn_token_bytes(self, prompt: _Prompt) -> None:
        from engine.memory.prompt_cache import cache_nbytes

        if self._token_bytes or prompt.cache is None or not prompt.fed:
            return
        keys = getattr(prompt.cache[0], "keys", None)
        if isinstance(keys, tuple) and keys:  # a quantized cache: (values, scales, biases)
            keys = keys[0]
        width = keys.shape[2] if keys is not None and hasattr(keys, "shape") else 0
        width = width or getattr(prompt.cache[0], "capacity", 0)  # a shared-prefix layer
        if width:  # buffers hold `width` token positions, whatever is filled
            self._token_bytes = cache_nbytes(prompt.cache) // width

    def _room_for(self, prompt: _Prompt) -> bool:
        """Whether `prompt`'s reply fits beside the batch within the KV budget (a reply
        alone always runs)."""
        if not self.batch.size or self.kv_budget is None or not self._token_bytes:
            return True
        reply = prompt.reply
        context = self.loaded.info.context_length or 1 << 30
        tokens = min(len(reply.prompt_tokens) + reply.settings.max_tokens, context)
        held = self.batch.nbytes + sum(_nbytes(p.cache) for p in self.prompts)
        return held + tokens * self._token_bytes <= self.kv_budget

    # ---- decoding and finishing ----

    def _decode_step(self) -> None:
        try:
            ended = self.batch.step()
        except Exception as exc:  # the forward pass failed: no row's state can be trusted
            for row in self._abandon_rows():
                assert isinstance(row.owner, Reply)
                self.deliver(row.owner.handle, error_result(exc, row.owner.started))
            return
        self.prompt_cache.reserve(self.batch.nbytes)  # before the results publish it
        for row in ended:
            self._finish_row(row)

    def _finish_row(self, row: DecodeRow) -> None:
        reply = row.owner
        assert isinstance(reply, Reply) and row.stop_reason is not None
        if row.speculator is not None:
            row.speculator.drafter.release()
        if row.error is not None:
            self._store(row.cache, row.fed)
            self.deliver(reply.handle, error_result(row.error, reply.started))
            return
        self._finish(reply, row.stop_reason, row.cache, row.fed)

    def _finish(
        self, reply: Reply, reason: StopReason, cache: KVState | None, fed: list[int]
    ) -> None:
        self._store(cache, fed)
        try:
            result = reply.result(reason, fed)
        except Exception as exc:
            result = error_result(exc, reply.started)
        self.deliver(reply.handle, result)

    def _store(self, cache: KVState | None, fed: list[int]) -> None:
        if cache is not None:
            self.prompt_cache.store(fed, cache)

    def _give_back(self, cache: KVState | None, fed: list[int]) -> None:
        """Return a failed prompt's cache to the prompt cache, holding the tokens in `fed`
        (all fed whole), unless its state cannot be computed: a forward pass that raised
        while the graph was evaluated leaves it unusable, and it is dropped."""
        if cache is None or not fed:
            return
        try:
            mx.eval([c.state for c in cache])
        except Exception:  # the failure is inside the cache's own graph: nothing to keep
            return
        self.prompt_cache.store(fed, cache)

    def _abandon_rows(self) -> list[DecodeRow]:
        """Every row of the batch, its KV state dropped, and what each drafter held for it
        let go (a draft model's cache returns to its own prompt cache)."""
        rows = self.batch.abandon()
        for row in rows:
            if row.speculator is not None:
                row.speculator.drafter.release()
        return rows


def error_result(exc: BaseException, started: float) -> ChatResult:
    """The result of a request that failed with `exc`: "input" when the request was at
    fault (settings, grammar, a conversation the template cannot render)."""
    kind: ErrorKind = "input" if isinstance(exc, CorralError | ValueError) else "internal"
    name = type(exc).__name__
    result = ChatResult.failed(str(exc) or name, kind=kind, error_type=name, started=started)
    annotate_error(result, exc)  # a code (and the prompt's length) a front end can act on
    return result


def _nbytes(cache: KVState | None) -> int:
    return sum(int(getattr(c, "nbytes", 0)) for c in cache or [])
