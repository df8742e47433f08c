"""How many tokens a batch step feeds: rows with forced tokens feed several at once, padding
the others, only where a wide pass pays (as `PassCost` timed it); where it does not, they
feed them over several steps while the other rows go on, and every reply stays the same."""

from __future__ import annotations

import pytest

from engine.constraints.sources import json_schema_constraint
from engine.engine import Engine
from engine.runtime import batch as batch_module
from engine.runtime.speculative import PassCost
from engine.types import ChatRequest, SamplingSettings

SCHEMA = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "maxLength": 12},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["vendor", "total", "paid"],
    "additionalProperties": False,
}


def _requests() -> list[ChatRequest]:
    constraint = json_schema_constraint(SCHEMA, "invoice")
    greedy = SamplingSettings(temperature=0.0, max_tokens=64)
    texts = ["Invoice 1 from Acme.", "Invoice 2, paid.", "Invoice 3: 40 EUR.", "Hello there."]
    return [
        ChatRequest(
            [{"role": "user", "content": t}], greedy, constraint=constraint if i < 3 else None
        )
        for i, t in enumerate(texts)
    ]


@pytest.mark.parametrize("wide_costs", ["width", "one"])
def test_rows_feed_forced_tokens_as_wide_as_pays_and_reply_the_same(
    tiny_model_dir, monkeypatch, wide_costs
) -> None:
    engine = Engine(reuse_prefixes=False, speculative=False)
    try:
        engine.load_model(str(tiny_model_dir)).result()
        requests = _requests()
        alone = [engine.chat(r) for r in requests]
        if wide_costs == "width":  # a CPU: a pass costs its width (padding included)
            monkeypatch.setattr(PassCost, "relative", lambda self, rows, width: float(width))
        else:  # a GPU: a wide pass costs what one token's does
            monkeypatch.setattr(PassCost, "relative", lambda self, rows, width: 1.0)
        steps: list[tuple[int, int]] = []  # (width fed, widest row's known tokens)
        chosen = batch_module.DecodeBatch._width

        def width(self):
            got = chosen(self)
            steps.append((got, max(len(row.pending) for row in self.rows)))
            return got

        monkeypatch.setattr(batch_module.DecodeBatch, "_width", width)
        together = [h.result(timeout=300) for h in engine.submit_many(requests)]
    finally:
        engine.close()
    for batched, single in zip(together, alone, strict=True):
        assert batched.error is None and single.error is None
        assert (batched.text, batched.stop_reason) == (single.text, single.stop_reason)
        assert batched.stats.generated_tokens == single.stats.generated_tokens
    assert any(single.stats.forced_tokens > 1 for single in alone[:3])
    narrower = [s for s in steps if s[0] < s[1]]
    if wide_costs == "width":  # forced runs were fed over several steps
        assert narrower
    else:
        assert not narrower and any(w > 1 for w, _ in steps)
