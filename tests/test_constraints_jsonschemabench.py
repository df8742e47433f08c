"""Real-world JSON schemas (JSONSchemaBench, in ../shared/datasets): every schema compiles or
fails with a clear error in bounded time, and compiled ones accept the valid instances and
reject the invalid ones, token by token, without a model. The same checks on schemas
written here, which need no dataset, are in test_constraints_schemas.py."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from llguidance import LLMatcher
from shared_datasets import dataset

from engine.constraints import ConstraintError
from engine.constraints.sources import json_schema_constraint
from engine.constraints.validate import to_grammar
from engine.types import SchemaOptions

PER_SUBSET = 80
# CPU seconds of the compiling thread (not wall time: other processes' load does not count)
COMPILE_BOUND_S = 10.0
ENDS = (0, 2)  # <|endoftext|>, <|im_end|>
EXACT = SchemaOptions(tight=False, lenient=False)


def sample(bench: Path) -> list[Path]:
    """An even spread of each subset, the same on every run."""
    files: list[Path] = []
    for subset in sorted(p for p in bench.iterdir() if p.is_dir()):
        found = sorted(subset.glob("*.json"))
        files += found[:: max(1, len(found) // PER_SUBSET)][:PER_SUBSET]
    return files


@pytest.fixture(scope="module")
def bench() -> Path:
    return dataset("jsonschemabench")


@pytest.fixture(scope="module")
def lltok(tiny_model):
    from engine.constraints.tokenizer import ll_tokenizer

    return ll_tokenizer(tiny_model[1], ENDS)


@pytest.fixture(scope="module")
def compiled(bench, lltok):
    """file -> grammar or error message, with the time each took to reach its first mask."""
    results = {}
    for path in sample(bench):
        doc = json.loads(path.read_text(encoding="utf-8"))
        started = time.thread_time()
        try:
            # as written (not tightened) and strict: the grammar must agree with the tests
            spec = replace(json_schema_constraint(doc["schema"], path.name), options=EXACT)
            grammar = to_grammar(spec)
            matcher = LLMatcher(lltok, grammar, log_level=0)
            matcher.compute_bitmask()  # compilation is lazy: the first mask does the work
            error = matcher.get_error() if matcher.is_error() else None
        except ConstraintError as exc:
            grammar, error = None, str(exc)
        results[path] = (None if error else grammar, error, time.thread_time() - started, doc)
    return results


def test_every_schema_compiles_or_fails_clearly_in_bounded_time(compiled):
    assert len(compiled) >= 300
    for path, (grammar, error, seconds, _) in compiled.items():
        assert seconds < COMPILE_BOUND_S, f"{path.name} took {seconds:.1f} s"
        assert (grammar is None) != (error is None), path.name
        if error is not None:
            assert len(error.strip()) > 10 and "panic" not in error.lower(), (path.name, error)


def test_real_world_subsets_mostly_compile(compiled):
    """Github and Glaive schemas use the keywords llguidance supports (published: ~79%
    over all of MaskBench; Handwritten and Synthesized probe unsupported keywords)."""
    for subset in ("Github_trivial", "Github_easy", "Glaiveai2K"):
        rows = [g for p, (g, *_rest) in compiled.items() if p.parent.name == subset]
        rate = sum(g is not None for g in rows) / len(rows)
        assert rate >= 0.9, (subset, rate)


def test_instances_are_accepted_or_rejected_token_by_token(compiled, lltok):
    checked = masked = 0
    for path, (grammar, _, _, doc) in compiled.items():
        if grammar is None:
            continue
        for case in doc.get("tests", []):
            # Corral compiles schemas to compact JSON, so instances are serialized compactly.
            text = json.dumps(case["data"], separators=(",", ":"), ensure_ascii=False)
            tokens = lltok.tokenize_str(text)
            matcher = LLMatcher(lltok, grammar, log_level=0)
            check_masks = case["valid"] and masked < 25
            accepted = True
            for token in tokens:
                if check_masks:
                    assert allowed(matcher)[token], (path.name, lltok.dbg_tokens([token]))
                if not matcher.consume_token(token):
                    accepted = False
                    break
            accepted = accepted and matcher.is_accepting()
            assert accepted == case["valid"], (path.name, case["valid"], text[:200])
            if accepted:
                # every end token is allowed once the grammar accepts
                assert all(allowed(matcher)[list(ENDS)]), path.name
            masked += check_masks
            checked += 1
    assert checked >= 300 and masked == 25


def allowed(matcher: LLMatcher) -> np.ndarray:
    return np.unpackbits(np.frombuffer(matcher.compute_bitmask(), np.uint8), bitorder="little")
