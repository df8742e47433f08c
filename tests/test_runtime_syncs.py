"""How often one decode step waits for the device (`engine.runtime.batch.DecodeBatch.step`).

Every wait for the device (`mx.eval`, or reading an array back with `.item()` /
`.tolist()`) stalls the loop while a fast GPU idles, so the design bounds them per step:

- rows that sample plainly, free or constrained, alone or side by side: one read per step,
  of all rows' samples from the step before (the next step's forward pass is already built
  when it happens); a lone constrained row at a narrow mask reads its token at once and
  skips the next step's read, so over a reply there is at most one more read than steps;
- speculating rows: one read of every row's sampled token before drafting, and one read of
  the model's choices at every drafted position of every row, however many rows and
  positions (a greedy constrained row needs another only where its mask rules out the
  model's choice, which ends its draft), plus the plain rows' read: at most three;
- `mx.async_eval` (which starts work, not waits for it): at most two per step, and one
  where no mask is waited for: free rows, rows recording their log-probabilities (the
  figures start with the samples), a constrained row whose mask is already in (it feeds
  the tokens its grammar forced, or was held at a narrow mask).

Counted through wrappers around those calls, not by timing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import mlx.core as mx
import pytest
from mlx_lm.models.cache import make_prompt_cache

from engine.constraints.row import RowConstraint
from engine.constraints.sources import json_schema_constraint
from engine.prompt.chat import encode_chat
from engine.runtime.batch import DecodeBatch, DecodeRow
from engine.runtime.logprobs import RowLogprobs
from engine.runtime.prefill import prefill
from engine.runtime.sampling import RowSampler, end_token_ids
from engine.runtime.speculative import PassCost, PromptLookup, Speculator
from engine.types import SamplingSettings, StopReason

LONG_TEXT = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 500}},
    "required": ["text"],
    "additionalProperties": False,
}
PROMPTS = (
    "Repeat: a b c a b c a b c a b c",
    "Repeat: 1 2 3 1 2 3 1 2 3",
    "Say: red blue red blue red blue",
    "Write: x y z x y z x y z",
)


class Counts:
    """Calls that wait for the device, and async_evals, since the last `reset`."""

    def __init__(self) -> None:
        self.syncs = 0
        self.async_evals = 0

    def reset(self) -> None:
        self.syncs = self.async_evals = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    found = Counts()

    def waiting(fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            found.syncs += 1
            return fn(*args, **kwargs)

        return wrapped

    def starting(*args: Any, **kwargs: Any) -> Any:
        found.async_evals += 1
        return async_eval(*args, **kwargs)

    async_eval = mx.async_eval
    monkeypatch.setattr(mx, "eval", waiting(mx.eval))
    monkeypatch.setattr(mx, "async_eval", starting)
    monkeypatch.setattr(mx.array, "item", waiting(mx.array.item))
    monkeypatch.setattr(mx.array, "tolist", waiting(mx.array.tolist))
    yield found


class Owner:
    cancelled = False

    def __init__(self, limit: int) -> None:
        self.limit, self.tokens = limit, 0

    def take(self, token: int) -> StopReason | None:
        self.tokens += 1
        return StopReason.LENGTH if self.tokens >= self.limit else None

    def forced_token(self) -> int | None:  # no thinking block to end
        return None


def CheapWidePasses() -> PassCost:  # noqa: N802  (reads as the cost it stands for)
    """Step costs as a GPU has them (a wider pass costs about what one token's does): the
    rows keep drafting, whatever this CPU's step times say."""
    return PassCost(learn=False)


def _rows(
    tiny_model: Any,
    n: int,
    *,
    constrained: bool,
    speculative: bool,
    schema: dict[str, Any] = LONG_TEXT,
    logprobs: int | None = None,
) -> list[DecodeRow]:
    model, tokenizer = tiny_model
    spec = json_schema_constraint(schema, "schema")
    rows = []
    for text in PROMPTS[:n]:
        prompt = encode_chat(tokenizer, [{"role": "user", "content": text}])
        cache, fed = make_prompt_cache(model), list[int]()
        prefill(model, cache, prompt[:-1], fed, cancel=threading.Event())
        constraint = None
        if constrained:
            constraint = RowConstraint(tokenizer, spec, end_token_ids(tokenizer))
            constraint.collect()  # compiled: the row joins with its first mask
        owner = Owner(40)
        drafts = Speculator(PromptLookup(), lambda o=owner: o.limit - o.tokens)
        rows.append(
            DecodeRow(
                owner,
                cache,
                fed,
                prompt[-1:],
                sampler=RowSampler(SamplingSettings(temperature=0.0)),
                constraint=constraint,
                speculator=drafts if speculative else None,
                row_logprobs=None if logprobs is None else RowLogprobs(logprobs, len(prompt)),
            )
        )
    return rows


def _step_counts(batch: DecodeBatch, counts: Counts, steps: int) -> list[tuple[int, int]]:
    """(syncs, async_evals) of each of up to `steps` steps in which no row left (rows that
    leave hand their KV state back, which mlx-lm's caches read)."""
    batch.step()  # rows join
    out = []
    for _ in range(steps):
        counts.reset()
        if batch.step() or not batch.busy:
            break
        out.append((counts.syncs, counts.async_evals))
    return out


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("constrained", [False, True])
def test_a_plain_step_waits_for_the_device_once(tiny_model, counts, n, constrained) -> None:
    batch = DecodeBatch(tiny_model[0])
    for row in _rows(tiny_model, n, constrained=constrained, speculative=False):
        batch.join(row)
    found = _step_counts(batch, counts, 20)
    assert len(found) >= 10
    syncs = [s for s, _ in found]
    if constrained and n == 1:  # a token held at a narrow mask is read at once
        assert max(syncs) <= 2 and sum(syncs) <= len(syncs) + 1, syncs
    else:
        assert max(syncs) == 1, syncs
    assert max(a for _, a in found) <= 2


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("constrained", [False, True])
def test_a_speculative_step_waits_at_most_three_times(tiny_model, counts, n, constrained) -> None:
    """However many rows draft and however long their drafts."""
    batch = DecodeBatch(tiny_model[0], cost=CheapWidePasses())
    rows = _rows(tiny_model, n, constrained=constrained, speculative=True)
    for row in rows:
        batch.join(row)
    found = _step_counts(batch, counts, 20)
    drafted = sum(row.speculator.stats.drafted for row in rows if row.speculator)
    passes = sum(row.speculator.stats.passes for row in rows if row.speculator)
    assert drafted > passes > 0  # drafts of several tokens were verified
    assert max(s for s, _ in found) <= 3, found
    assert max(a for _, a in found) <= 2


@pytest.mark.parametrize("n", [1, 4])
def test_recording_logprobs_starts_a_step_once(tiny_model, counts, n) -> None:
    """Rows recording their top-20 log-probabilities: the figures are evaluated with the
    step's samples (one async_eval) and read back with them (one wait)."""
    batch = DecodeBatch(tiny_model[0])
    for row in _rows(tiny_model, n, constrained=False, speculative=False, logprobs=20):
        batch.join(row)
    found = _step_counts(batch, counts, 12)
    assert len(found) >= 8
    assert {a for _, a in found} == {1}, found
    assert max(s for s, _ in found) == 1, found


RECORD = {
    "type": "object",
    "properties": {
        "member_first_name_of_the_library": {"type": "string", "maxLength": 6},
        "member_is_active_in_the_library": {"type": "boolean"},
        "member_home_branch_of_the_library": {"enum": ["north", "south"]},
    },
    "required": [
        "member_first_name_of_the_library",
        "member_is_active_in_the_library",
        "member_home_branch_of_the_library",
    ],
    "additionalProperties": False,
}


def test_a_constrained_step_whose_mask_is_in_starts_once(tiny_model, counts) -> None:
    """A lone row under a key-heavy schema: in the steps that feed the tokens its grammar
    forced (their mask was computed with them) nothing waits for a matcher, and the step
    starts once, as a free one does; the others start twice (the pass, then the masked
    sampling)."""
    batch = DecodeBatch(tiny_model[0])
    (row,) = _rows(tiny_model, 1, constrained=True, speculative=False, schema=RECORD)
    batch.join(row)
    found = _step_counts(batch, counts, 30)
    starts = [a for _, a in found]
    assert 1 in starts and max(starts) <= 2, starts
