"""Every constrained reply finishes valid: 40 real-world schemas from ../shared/datasets
(Github_easy, Glaiveai2K, Handwritten), the default model, greedy, 120 tokens. Each reply is
complete and validates with jsonschema against the schema as written, less the keywords
Corral named as ignored in its warnings (lenient by default: Handwritten's schemas use
`not`); it may have been steered toward its end or closed to fit; one that cannot be says
why (no ending within the budget). Replies that end on their own, never steered, are the
same token for token without the closing machinery. The replies are submitted together
and decode side by side (greedy rows give what they give alone), which takes a third of
the time of one after another."""

from __future__ import annotations

import json

import pytest
from shared_datasets import dataset

from benchmarks.coverage import first_mask_ms, load_schema, replies_for
from engine.constraints.sources import json_schema_constraint

PER_SUBSET = {"Github_easy": 16, "Glaiveai2K": 16, "Handwritten": 8}
MAX_TOKENS = 120


@pytest.fixture(scope="module")
def sample(default_engine):
    """A fixed spread of schemas that compile for the default model's tokenizer."""
    from engine.constraints.tokenizer import ll_tokenizer
    from engine.runtime.sampling import end_token_ids

    bench = dataset("jsonschemabench")
    lltok = default_engine.run(
        lambda lm: ll_tokenizer(lm.tokenizer, end_token_ids(lm.tokenizer))
    ).result()
    picked = []
    for subset, count in PER_SUBSET.items():
        found = sorted((bench / subset).glob("*.json"))
        step = max(1, len(found) // (count * 3))
        kept = 0
        for path in found[::step]:
            if kept == count:
                break
            spec = json_schema_constraint(load_schema(path)[0], path.name)
            if first_mask_ms(spec, lltok) is not None:
                picked.append(path)
                kept += 1
    assert len(picked) == sum(PER_SUBSET.values())
    return picked


def _repeats_a_key(text: str) -> bool:
    seen_twice = False

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        nonlocal seen_twice
        keys = [k for k, _ in items]
        seen_twice = seen_twice or len(set(keys)) < len(keys)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return seen_twice


@pytest.mark.slow
def test_every_reply_is_complete_and_valid_within_the_budget(default_engine, sample):
    failures, closed, steered, natural, repeated_keys = [], 0, 0, [], []
    replies = replies_for(default_engine, sample, MAX_TOKENS)
    for path, (result, ok) in zip(sample, replies, strict=True):
        assert result.stats.generated_tokens <= MAX_TOKENS
        closed += result.closed_to_fit
        turned = result.stats.steered_tokens > 0 or result.stats.loops_moved_on > 0
        steered += turned
        if not result.closed_to_fit and not turned and ok:
            natural.append(path)
        if ok:
            continue
        # an incomplete reply is allowed only when no ending fitted, and it must say so
        honest = result.incomplete and any(
            "no valid ending" in w or "more than were left" in w for w in result.warnings
        )
        if honest:
            continue
        if not result.incomplete and _repeats_a_key(result.text):
            # llguidance does not check that an object's keys are unique: where a schema
            # allows keys by pattern, a model can write one twice, and the parsed object
            # (last one wins) can then miss minProperties. A known limit, counted apart.
            repeated_keys.append(path.name)
            continue
        failures.append((path.name, result.text[-80:], result.warnings, result.error))
    assert not failures, failures
    assert len(repeated_keys) <= 1, repeated_keys
    assert closed + steered > 0  # the policy did its work on some of them
    # replies that ended on their own do not change without the closing machinery
    two = natural[:2]
    with_closing = replies_for(default_engine, two, MAX_TOKENS)
    without = replies_for(default_engine, two, MAX_TOKENS, close_to_fit=False, close_loops=False)
    for path, (on, _), (off, _) in zip(two, with_closing, without, strict=True):
        assert on.token_ids == off.token_ids and on.text == off.text, path.name
