"""What a failed reply leaves behind: the prefix the prompt cache lent it goes back (the
next request on that conversation still starts from it), a draft model's cache returns to
its own prompt cache, and the closing policy does not keep a model's tokenizer alive."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from engine.engine import Engine
from engine.types import ChatRequest, SamplingSettings, StopReason

GREEDY = SamplingSettings(temperature=0.0, max_tokens=8)
HISTORY = [
    {"role": "system", "content": "You are a helpful assistant who answers briefly. " * 6},
    {"role": "user", "content": "Tell me about the weather in Lisbon in spring."},
]


class FailingForward:
    """The model, with a forward pass that raises on demand: after `armed` is set, the
    `after`-th call (counting from 1) raises, as an out-of-memory error or a bug inside a
    model's code would. Every other attribute is the model's own."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.armed = False
        self.after = 1
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if self.armed:
            self.calls += 1
            if self.calls >= self.after:
                self.armed = False
                raise RuntimeError("injected failure in the forward pass")
        return self.model(inputs, *args, **kwargs)


@pytest.fixture
def failing_engine(tiny_model_dir: Path):
    engine = Engine()
    engine.load_model(str(tiny_model_dir)).result()

    def wrap(loaded: Any) -> FailingForward:
        loaded.model = FailingForward(loaded.model)
        return loaded.model

    forward = engine.run(wrap).result()
    yield engine, forward
    engine.close()


def _turn(engine: Engine, messages: list[dict[str, str]]):
    return engine.chat(ChatRequest(messages, GREEDY))


def test_a_prefill_that_fails_gives_the_cached_prefix_back(failing_engine) -> None:
    """Regenerating a reply reuses the cached conversation in place (the prompt cache lends
    its entry); when that prefill fails, the entry comes back, so the next try does not
    start from zero."""
    engine, forward = failing_engine
    first = _turn(engine, HISTORY)
    assert first.error is None
    # A first regenerate: a model's first branch checks (a few tokens' pass) that it reads
    # shared prefixes, which would take the injected failure meant for the prefill.
    assert _turn(engine, HISTORY).error is None
    forward.armed, forward.after = True, 1  # the regenerate's prefill raises
    failed = _turn(engine, HISTORY)
    assert failed.stop_reason == StopReason.ERROR
    assert "injected failure" in (failed.error or "")
    again = _turn(engine, HISTORY)
    assert again.error is None
    # The whole prompt but its last token (which the decode step feeds) is served from the
    # cache, as it would have been without the failure (without the fix: 0).
    assert again.stats.cached_tokens == first.stats.prompt_tokens - 1


def test_a_failed_decode_step_returns_the_draft_models_cache(
    failing_engine, tiny_model_dir: Path
) -> None:
    engine, forward = failing_engine
    engine.load_draft_model(str(tiny_model_dir)).result()
    engine.set_speculative(True)
    draft_store = engine._draft[1]  # type: ignore[index]
    before = draft_store.stats().entries
    request = ChatRequest(
        [{"role": "user", "content": "Count: one two three one two three one two three"}],
        SamplingSettings(temperature=0.0, max_tokens=24),
    )
    forward.armed, forward.after = True, 4  # the prefill, then a few decode steps, then boom
    failed = engine.chat(request)
    assert failed.stop_reason == StopReason.ERROR
    # The row was abandoned with the batch; its draft cache went back to the draft store.
    assert draft_store.stats().entries > before


def test_the_closing_policy_lives_as_long_as_its_tokenizer(tiny_model_dir: Path) -> None:
    """Loading a model again and again does not pile up closing policies (each holds the
    vocabulary's token texts): a policy is let go with the model's tokenizer."""
    import mlx_lm

    from engine.constraints.closing import UNOWNED_POLICIES, ClosingPolicy
    from engine.constraints.tokenizer import ll_tokenizer

    def load_and_close() -> weakref.ref[ClosingPolicy]:
        tokenizer = mlx_lm.load(str(tiny_model_dir))[1]
        llg = ll_tokenizer(tokenizer, [2])
        policy = ClosingPolicy.for_tokenizer(llg)
        assert ClosingPolicy.for_tokenizer(llg) is policy  # built once per tokenizer
        return weakref.ref(policy)

    policies = [load_and_close() for _ in range(UNOWNED_POLICIES + 2)]
    gc.collect()
    assert [p() for p in policies] == [None] * len(policies)


def test_policies_of_unowned_tokenizers_are_bounded() -> None:
    import llguidance

    from engine.constraints.closing import UNOWNED_POLICIES, ClosingPolicy

    refs = [
        weakref.ref(ClosingPolicy.for_tokenizer(llguidance.LLTokenizer("byte")))
        for _ in range(UNOWNED_POLICIES + 3)
    ]
    gc.collect()
    assert sum(r() is not None for r in refs) <= UNOWNED_POLICIES
