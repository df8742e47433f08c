"""JSON schemas written in the suite (tests/schema_corpus.py), token by token on the real
vocabulary, no model: each compiles, accepts every instance jsonschema accepts and rejects
every one it rejects, allows each token of a valid instance and every end token once it is
complete; schemas with keywords llguidance cannot enforce are refused naming them. The
same checks over real-world schemas are in test_constraints_jsonschemabench.py."""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import numpy as np
import pytest
from llguidance import LLMatcher
from schema_corpus import CASES, UNSUPPORTED, SchemaCase

from engine.constraints.sources import json_schema_constraint
from engine.constraints.validate import validate_constraint
from engine.types import SchemaOptions

ENDS = (0, 2)  # <|endoftext|>, <|im_end|>


@pytest.fixture(scope="module")
def lltok(tiny_model):
    from engine.constraints.tokenizer import ll_tokenizer

    return ll_tokenizer(tiny_model[1], ENDS)


def allowed(matcher: LLMatcher) -> np.ndarray:
    return np.unpackbits(np.frombuffer(matcher.compute_bitmask(), np.uint8), bitorder="little")


def test_the_corpus_agrees_with_jsonschema():
    for case in CASES:
        validator = jsonschema.Draft202012Validator(
            case.schema, format_checker=jsonschema.FormatChecker()
        )
        assert all(validator.is_valid(v) for v in case.valid), case.name
        assert not any(validator.is_valid(v) for v in case.invalid), case.name


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_instances_are_accepted_or_rejected_token_by_token(case: SchemaCase, lltok):
    report = validate_constraint(json_schema_constraint(case.schema, case.name), lltok)
    assert report.ok and not report.warnings, report.summary()
    grammar = report.grammar
    assert grammar is not None
    for valid, instances in ((True, case.valid), (False, case.invalid)):
        for value in instances:
            # Corral compiles schemas to compact JSON, so instances are serialized compactly.
            text = json.dumps(value, separators=(",", ":"))
            matcher = LLMatcher(lltok, grammar, log_level=0)
            accepted = True
            for token in lltok.tokenize_str(text):
                if valid:
                    assert allowed(matcher)[token], (case.name, text, lltok.dbg_tokens([token]))
                if not matcher.consume_token(token):
                    accepted = False
                    break
            accepted = accepted and matcher.is_accepting()
            assert accepted == valid, (case.name, valid, text)
            if accepted:  # every end token is allowed once the value is complete
                assert all(allowed(matcher)[list(ENDS)]), case.name


@pytest.mark.parametrize(("schema", "keyword"), UNSUPPORTED, ids=lambda v: str(v)[:20])
def test_unenforceable_keywords_are_refused_by_name_under_strict_schemas(schema, keyword):
    spec = replace(json_schema_constraint(schema, "x.json"), options=SchemaOptions(lenient=False))
    (error,) = validate_constraint(spec).errors
    assert "not supported" in error.message and keyword in error.message
    assert '"lenient": true' in error.message  # and how to accept the schema anyway


@pytest.mark.parametrize(("schema", "keyword"), UNSUPPORTED, ids=lambda v: str(v)[:20])
def test_unenforceable_keywords_are_ignored_by_default_with_a_warning_naming_them(schema, keyword):
    report = validate_constraint(json_schema_constraint(schema, "x.json"))
    assert report.ok, report.summary()
    assert any(keyword in w.message and "not enforced" in w.message for w in report.warnings)
