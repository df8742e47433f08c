"""The constrained loop: every completed reply validates independently (jsonschema, re,
the lark package), masked tokens are never sampled, end tokens come exactly when the grammar
accepts, forced tokens share one forward pass, and the figures are filled in."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

import jsonschema
import lark
import pytest

from engine.constraints.sources import constraint_from_file, json_schema_constraint
from engine.types import (
    ChatRequest,
    ConstraintSpec,
    GenerationStats,
    SamplingSettings,
    SchemaOptions,
    StopReason,
)

GRAMMARS = Path(__file__).resolve().parents[1] / "resources" / "grammars"
USER = [{"role": "user", "content": "Fill in the form."}]
GREEDY = SamplingSettings(temperature=0.0, max_tokens=80)
SETTINGS = [
    GREEDY,
    SamplingSettings(temperature=1.0, seed=1, max_tokens=80),
    SamplingSettings(temperature=1.5, top_p=0.9, seed=2, max_tokens=80),
    SamplingSettings(temperature=1.2, top_k=5, seed=3, max_tokens=80),
    SamplingSettings(temperature=1.0, min_p=0.2, seed=4, max_tokens=80),
    SamplingSettings(temperature=0.8, repetition_penalty=1.5, seed=5, max_tokens=80),
]
FORM = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "count": {"type": "integer", "minimum": -5, "maximum": 250},
        "tag": {"type": "string", "maxLength": 6},
        "color": {"enum": ["red", "green", "blue"]},
        "level": {"enum": [0.5, 1, 2.25, None]},
        "items": {"type": "array", "items": {"enum": [1, 2, 3]}, "maxItems": 3},
    },
    "required": ["ok", "count", "tag", "color", "items"],
    "additionalProperties": False,
}
LIST_LARK = """start: "[" item ("," item)~0..3 "]"
item: WORD | NUMBER
WORD: /[a-z]{1,8}/
NUMBER: /[0-9]{1,3}/
"""
GREETING_GBNF = 'root ::= ("hello" | "hi") " " name "!"\nname ::= [A-Z] [a-z]{1,6}\n'
GREETING_LARK = 'start: ("hello" | "hi") " " NAME "!"\nNAME: /[A-Z][a-z]{1,6}/\n'


def chat(engine, constraint, settings=GREEDY, messages=USER):
    result = engine.chat(ChatRequest(messages, settings, constraint=constraint))
    assert result.error is None, result.error
    return result


def completed(result) -> bool:
    return result.stop_reason == StopReason.EOS and not result.incomplete


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"t{s.temperature}")
def test_json_replies_validate_against_the_schema(tiny_engine, settings):
    result = chat(tiny_engine, json_schema_constraint(FORM, "form"), settings)
    assert completed(result), (result.text, result.stop_reason)
    jsonschema.validate(json.loads(result.text), FORM)
    assert result.constraint_name == "form"


def test_regex_replies_match(tiny_engine):
    pattern = r"[a-z]{2,8}@(mail|post)\.(com|org)"
    for seed in range(4):
        settings = SamplingSettings(temperature=1.0, seed=seed, max_tokens=40)
        result = chat(tiny_engine, ConstraintSpec("regex", pattern), settings)
        assert completed(result) and re.fullmatch(pattern, result.text), result.text


def test_lark_replies_parse_with_the_lark_package(tiny_engine):
    parser = lark.Lark(LIST_LARK)
    for seed in range(4):
        settings = SamplingSettings(temperature=1.0, seed=seed, max_tokens=60)
        result = chat(tiny_engine, ConstraintSpec("lark", LIST_LARK), settings)
        assert completed(result), result.text
        parser.parse(result.text)


def test_gbnf_replies_parse_with_an_equivalent_lark_grammar(tiny_engine):
    parser = lark.Lark(GREETING_LARK)
    for seed in range(3):
        settings = SamplingSettings(temperature=1.0, seed=seed, max_tokens=30)
        result = chat(tiny_engine, ConstraintSpec("gbnf", GREETING_GBNF), settings)
        assert completed(result), result.text
        parser.parse(result.text)


def test_lark_with_json_embed_stops_at_the_limit_when_no_ending_fits(tiny_engine):
    """The opening "Reasoning: " takes 3 tokens: no complete reply fits in 6, so the reply
    stops at the limit and says it is incomplete (where a reply completes: the test
    below)."""
    spec = constraint_from_file(GRAMMARS / "verdict.lark")
    short = chat(tiny_engine, spec, SamplingSettings(temperature=1.0, seed=0, max_tokens=6))
    assert short.stop_reason == StopReason.LENGTH and short.incomplete, short.text
    assert short.text.startswith("Reasoning: ") and "Verdict" not in short.text
    assert short.stats.generated_tokens == 6


def test_reply_figures(tiny_engine):
    stats = chat(tiny_engine, json_schema_constraint(FORM)).stats
    assert stats.constrained
    assert stats.grammar_compile_ms > 0 and stats.mask_mean_ms > 0
    assert stats.mask_p99_ms >= stats.mask_mean_ms * 0.5
    # the forward passes cannot have waited for masks longer than the reply took
    assert 0 <= stats.mask_overhead_ms < stats.total_s * 1e3
    assert stats.forced_tokens > 0  # the keys are forced
    assert 0 < stats.forward_passes < stats.generated_tokens + 1


def test_length_limit_marks_the_reply_incomplete(tiny_engine):
    settings = SamplingSettings(temperature=0.0, max_tokens=5)
    result = chat(tiny_engine, json_schema_constraint(FORM), settings)
    assert result.stop_reason == StopReason.LENGTH and result.incomplete
    assert result.stats.generated_tokens == 5


def test_forced_text_ends_the_reply(tiny_engine):
    result = chat(tiny_engine, ConstraintSpec("regex", "The answer is (yes|no)\\."))
    assert completed(result) and result.text in ("The answer is yes.", "The answer is no.")
    assert result.stats.forced_tokens >= 3
    assert result.stats.forward_passes <= 4


def test_compile_errors_come_back_as_errors(tiny_engine):
    bad = ConstraintSpec("lark", 'start: "a"\nitem: "b" ???\n', "bad.lark")
    result = tiny_engine.chat(ChatRequest(USER, GREEDY, constraint=bad))
    assert result.stop_reason == StopReason.ERROR
    assert result.error_type == "ConstraintError" and "bad.lark: line 2" in (result.error or "")
    unsupported = json_schema_constraint({"type": "string", "not": {"pattern": "\\d"}}, "s.json")
    strict = replace(unsupported, options=SchemaOptions(lenient=False))
    result = tiny_engine.chat(ChatRequest(USER, GREEDY, constraint=strict))
    assert "s.json" in result.error and '"not"' in result.error
    # lenient by default: the reply goes ahead and says what was not enforced
    result = tiny_engine.chat(ChatRequest(USER, GREEDY, constraint=unsupported))
    assert result.error is None and any('"not"' in w for w in result.warnings)
    # the engine carries on
    assert chat(tiny_engine, ConstraintSpec("regex", "ok")).text == "ok"


def test_cancel_stops_a_constrained_reply(tiny_engine):
    started = threading.Event()
    request = ChatRequest(
        USER,
        SamplingSettings(temperature=1.0, seed=0, max_tokens=4000),
        constraint=ConstraintSpec("regex", "[a-z ]+"),
    )
    handle = tiny_engine.submit(request, on_event=lambda e: started.set())
    started.wait(30)
    handle.cancel()
    result = handle.result(30)
    assert result.stop_reason == StopReason.CANCELLED and result.incomplete


# ---- the decoder driven directly, on the engine thread ----


def decode(engine, spec, *, serial=False, ends=None, processors=(), max_tokens=60):
    """Run one constrained row through the decode loop alone; return what a test needs."""
    from mlx_lm.models.cache import make_prompt_cache

    from engine.constraints.row import RowConstraint
    from engine.prompt.chat import encode_chat
    from engine.runtime.batch import decode_alone
    from engine.runtime.prefill import prefill
    from engine.runtime.sampling import RowSampler, end_token_ids

    def job(loaded):
        model, tok = loaded.model, loaded.tokenizer
        prompt = encode_chat(tok, USER)
        cache = make_prompt_cache(model)
        fed: list[int] = []
        prefill(model, cache, prompt[:-1], fed, cancel=threading.Event())
        end = end_token_ids(tok) if ends is None else set(ends)
        runtime = RowConstraint(tok, spec, end, on_pool=not serial)
        tokens = decode_alone(
            model,
            cache,
            prompt[-1:],
            fed,
            sampler=RowSampler(GREEDY),
            processors=list(processors),
            constraint=runtime,
            overlap=not serial,
        )
        out = []
        started = time.perf_counter()
        for token in tokens:
            out.append(token)
            if token in end or len(out) >= max_tokens:
                break
        tokens.close()
        elapsed_ms = (time.perf_counter() - started) * 1e3
        stats = GenerationStats()
        runtime.fill_stats(stats)
        return {
            "tokens": out,
            "fed": fed,
            "prompt": prompt,
            "offset": cache[0].offset,
            "accepting": runtime.accepting,
            "finished": runtime.finished,
            "stats": stats,
            "elapsed_ms": elapsed_ms,
            "text": tok.decode([t for t in out if t not in end]),
        }

    return engine.run(job).result()


def test_serial_and_overlapped_loops_agree(tiny_engine):
    spec = json_schema_constraint(FORM)
    over = decode(tiny_engine, spec)
    serial = decode(tiny_engine, spec, serial=True)
    assert over["tokens"] == serial["tokens"]
    assert over["stats"].forced_tokens == serial["stats"].forced_tokens
    jsonschema.validate(json.loads(over["text"]), FORM)
    # The serial loop stands still for every mask: its overhead is at least the matcher
    # work of each sampled token (all but perhaps the last), and at most the loop's time.
    stats = serial["stats"]
    sampled = len(serial["tokens"]) - stats.forced_tokens
    assert sampled > 2
    assert stats.mask_overhead_ms >= stats.mask_mean_ms * (sampled - 1) * 0.999 > 0
    assert stats.mask_overhead_ms <= serial["elapsed_ms"]
    assert over["stats"].mask_overhead_ms <= over["elapsed_ms"]
    for run in (over, serial):
        # the cache holds exactly the tokens reported as fed
        assert run["fed"][: len(run["prompt"])] == run["prompt"]
        assert run["offset"] == len(run["fed"])


def boost(token_ids, by=1e9):
    """A logits processor pushing `token_ids` to the top (or, with a negative `by`, to the
    bottom), as a penalty gone wrong might."""
    import mlx.core as mx

    def process(context, logits):
        bump = mx.zeros(logits.shape[-1]).at[mx.array(list(token_ids))].add(by)
        return logits + bump

    return process


@pytest.mark.parametrize("serial", [False, True], ids=["overlapped", "serial"])
def test_end_tokens_come_exactly_when_the_grammar_accepts(tiny_engine, serial):
    # <|endoftext|> (0) is boosted after masking: it must stay masked until "[a-z]{3,5}"
    # has three letters, and then end the reply at once.
    run = decode(
        tiny_engine,
        ConstraintSpec("regex", "[a-z]{3,5}"),
        serial=serial,
        ends={0, 2},
        processors=[boost([0])],
    )
    assert run["tokens"][-1] == 0
    assert re.fullmatch("[a-z]{3,5}", run["text"]) and run["accepting"]


def test_lark_with_json_embed_completes_and_parses(tiny_engine, tiny_model_dir):
    """The tiny model rambles whitespace inside the embedded JSON until any limit (the
    closing policy finds no ending there), so the reply is steered to finish by
    construction: whitespace-only tokens pushed down, "}" and the end tokens pushed up
    (and a long word, to reach the cap in fewer steps), the grammar's mask deciding as
    always. The reasoning runs to its 300-character cap, the verdict closes as soon as the
    grammar lets it, the reply ends there, and both parts check (the verdict with
    jsonschema)."""
    spec = constraint_from_file(GRAMMARS / "verdict.lark")
    schema = json.loads(spec.source.split("verdict: %json", 1)[1])
    vocab = json.loads((tiny_model_dir / "tokenizer.json").read_text())["model"]["vocab"]
    blank = [i for text, i in vocab.items() if set(text) <= set("\u0120\u010a\u0109\u010d")]
    run = decode(
        tiny_engine,
        spec,
        ends={0, 2},
        processors=[boost([vocab["\u0120international"], vocab["}"], 0, 2]), boost(blank, -1e9)],
        max_tokens=400,
    )
    assert run["finished"] and run["accepting"], run["text"]  # nothing may follow
    found = re.fullmatch(r"Reasoning: ([^\n]{1,300})\nVerdict: (.*)", run["text"], re.S)
    assert found, run["text"]
    jsonschema.validate(json.loads(found.group(2)), schema)


def test_masked_tokens_cannot_be_revived(tiny_engine, tiny_model_dir):
    # Boost tokens the grammar forbids: the reply still matches.
    vocab = json.loads((tiny_model_dir / "tokenizer.json").read_text())["model"]["vocab"]
    digits = [vocab[str(d)] for d in range(10)]
    run = decode(
        tiny_engine,
        ConstraintSpec("regex", "[a-z]{2,12}"),
        processors=[boost(digits)],
        max_tokens=20,
    )
    assert re.fullmatch("[a-z]{2,12}", run["text"]), run["text"]


def test_dead_end_mid_reply_is_a_clear_error(tiny_engine, tiny_model_dir):
    from engine.constraints import ConstraintError

    vocab = json.loads((tiny_model_dir / "tokenizer.json").read_text())["model"]["vocab"]
    spec = ConstraintSpec("lark", 'start: "ab" loop | "c"\nloop: loop "x"\n', "dead.lark")
    with pytest.raises(ConstraintError, match="dead.lark: the reply reached a dead end"):
        decode(tiny_engine, spec, processors=[boost([vocab["ab"]])])


def test_stopped_matcher_finishes_without_an_end_token(tiny_engine):
    run = decode(tiny_engine, ConstraintSpec("lark", 'start: "yes" | "no"'), ends=set())
    assert run["finished"] and run["accepting"] and run["text"] in ("yes", "no")


# ---- the real default model, a few tokens ----


def test_default_model_answers_in_schema(default_engine):
    schema = {
        "type": "object",
        "properties": {
            "country": {"type": "string", "maxLength": 20},
            "capital": {"type": "string", "maxLength": 20},
        },
        "required": ["country", "capital"],
        "additionalProperties": False,
    }
    messages = [{"role": "user", "content": "What is the capital of France? Answer in JSON."}]
    result = chat(default_engine, json_schema_constraint(schema), GREEDY, messages)
    assert completed(result), result.text
    data = json.loads(result.text)
    jsonschema.validate(data, schema)
    assert "Paris" in data["capital"]


def test_default_model_regex(default_engine):
    messages = [{"role": "user", "content": "Is Paris in France? Answer yes or no."}]
    result = chat(
        default_engine,
        ConstraintSpec("regex", "(Yes|No), [a-z ]{1,20}\\."),
        SamplingSettings(temperature=0.0, max_tokens=20),
        messages,
    )
    assert completed(result) and re.fullmatch("(Yes|No), [a-z ]{1,20}\\.", result.text)


def test_a_checked_constraint_is_compiled_once_for_all_its_requests(tiny_engine):
    """Checking with the engine compiles the grammar for the model's tokenizer; replies
    with the checked spec copy that matcher instead of converting or compiling again."""
    report = tiny_engine.check_constraint(json_schema_constraint(FORM, "form.json"))
    assert report.ok, report.summary()
    spec = report.spec
    assert spec.compiled is not None and spec.compiled.compiles == 1
    for seed in range(3):
        settings = SamplingSettings(temperature=1.0, seed=seed, max_tokens=80)
        result = tiny_engine.chat(ChatRequest(USER, settings, constraint=spec))
        assert result.error is None and result.stats.constrained
        if not result.incomplete:
            jsonschema.validate(json.loads(result.text), FORM)
    assert spec.compiled.compiles == 1


def test_a_bad_grammar_fails_its_request_with_the_line(tiny_engine):
    bad = ConstraintSpec("lark", 'start: "a" b\n', "broken.lark")
    result = tiny_engine.chat(ChatRequest(USER, GREEDY, constraint=bad))
    assert result.stop_reason == StopReason.ERROR
    assert "broken.lark: line 1" in (result.error or "")
