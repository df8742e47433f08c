"""Compile constraints to llguidance grammars and report problems as data the GUI can show.

`to_grammar` converts a ConstraintSpec into an llguidance grammar string (raising
ConstraintError on syntax errors it can see itself); `validate_constraint` runs llguidance's
checks as well and never raises for a bad grammar: errors and warnings come back as
Diagnostics with the line and column where llguidance gives them. It also reports
grammars that can produce no text and JSON-schema keywords llguidance cannot enforce.

Both hand back the spec with its CompiledGrammar attached (`compile_constraint` when no
check is wanted): requests that use that spec convert nothing and, once a matcher has been
compiled for the model's tokenizer (by validation given that tokenizer, or by the first
request), compile nothing either.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

import llguidance
import numpy as np
from llguidance import LLMatcher

from engine.constraints import ConstraintError, Diagnostic
from engine.constraints.compiled import CompiledGrammar
from engine.constraints.gbnf import gbnf_to_grammar
from engine.constraints.limits import check_lark, check_schema_text
from engine.constraints.sources import ANY_JSON_SCHEMA, parse_json_schema
from engine.types import ConstraintSpec, ValidationReport

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions  # a TypedDict that exists only in the stub

# Compact JSON: no free-form whitespace, so a model cannot wander off into blank lines,
# and more of each object (keys, separators) is forced. A schema's own "x-guidance"
# settings override these.
JSON_COMPILE_DEFAULTS: JsonCompileOptions = {"whitespace_flexible": False}

_POSITION = re.compile(r"^(?:at )?(\d+)\((\d+)\):\s*")
_STOP_REASONS = ("NoExtension", "NoExtensionBias")
_FOLLOW_FORCED = 32
_DETAIL_ERROR = re.compile(r"^error: (.*)$", re.MULTILINE)
_UNIMPLEMENTED = re.compile(r"Unimplemented keys: \[(.*)\]")


def to_grammar(spec: ConstraintSpec) -> str:
    """The llguidance grammar for `spec`; raises ConstraintError for errors found converting it.

    Cheap (no lexer is built); llguidance reports the remaining errors when a matcher or
    `validate_constraint` compiles the result.
    """
    kind = spec.kind
    if kind == "any_json":
        return LLMatcher.grammar_from_json_schema(ANY_JSON_SCHEMA, defaults=JSON_COMPILE_DEFAULTS)
    if kind == "json_schema":
        label = spec.name or "JSON schema"
        literal = spec.source.strip()
        if literal == "false":
            diag = Diagnostic("Unsatisfiable schema: the schema is false, so nothing matches it")
            raise ConstraintError(f"{label}: {diag}", [diag])
        check_schema_text(spec.source, label)  # before native code: too deep would crash it
        try:  # llguidance parses the text itself; Python parses it only to explain a failure
            return LLMatcher.grammar_from_json_schema(
                "{}" if literal == "true" else spec.source, defaults=JSON_COMPILE_DEFAULTS
            )
        except ValueError as exc:
            parse_json_schema(spec.source, label)  # raises with line and column if not JSON
            diag = Diagnostic(str(exc))
            raise ConstraintError(f"{label}: {diag}", [diag]) from exc
    if kind == "lark":
        check_lark(spec.source, spec.name or "Lark grammar")
        return LLMatcher.grammar_from_lark(spec.source)
    if kind == "gbnf":
        return gbnf_to_grammar(spec.source, spec.name or "GBNF grammar")
    if kind == "regex":
        return LLMatcher.grammar_from_regex(spec.source)
    raise ConstraintError(f"unknown constraint kind {kind!r}")


def compile_constraint(spec: ConstraintSpec) -> ConstraintSpec:
    """`spec` with its CompiledGrammar: converted once, so every request using the returned
    spec shares one grammar and its compiled matchers. Raises ConstraintError for errors
    found converting it; llguidance reports the others when a request compiles it.
    A spec that already carries its grammar is returned as it is."""
    if spec.compiled is not None:
        return spec
    return replace(spec, compiled=CompiledGrammar(to_grammar(spec)))


def validate_constraint(
    spec: ConstraintSpec,
    tokenizer: llguidance.LLTokenizer | None = None,
    *,
    check_language: bool = True,
) -> ValidationReport:
    """Check `spec` without raising: syntax, llguidance's own checks and, with
    `check_language`, whether it can produce any text at all.

    `tokenizer` is the model's LLTokenizer if one is loaded; a byte tokenizer otherwise.
    """
    started = time.perf_counter()
    report = ValidationReport(spec)
    try:
        compiled = CompiledGrammar(to_grammar(spec))
    except ConstraintError as exc:
        report.errors = exc.diagnostics or [Diagnostic(str(exc))]
        compiled = None
    if compiled is not None:
        checked = _compile_checks(compiled, tokenizer)
        is_error, messages, matcher = checked
        diags = [parse_message(m, spec.kind, "error" if is_error else "warning") for m in messages]
        if is_error:
            report.errors.extend(diags)
        else:
            report.warnings.extend(diags)
        if check_language and not is_error:
            report.errors.extend(_language_problems(report, compiled.grammar, matcher, tokenizer))
        if not report.errors:
            report.spec = replace(spec, compiled=compiled)
            report.grammar = compiled.grammar
    report.check_ms = (time.perf_counter() - started) * 1e3
    return report


def _compile_checks(
    compiled: CompiledGrammar, tokenizer: llguidance.LLTokenizer | None
) -> tuple[bool, list[str], LLMatcher | None]:
    """(is_error, llguidance's errors or warnings, a matcher for the language check).

    With the model's tokenizer this is the grammar's one compile: the matcher is kept on
    `compiled` for requests to copy. Without one, llguidance checks the grammar alone.
    """
    if tokenizer is None:
        is_error, messages = LLMatcher.validate_grammar_with_warnings(compiled.grammar, None)
        return is_error, messages, None
    matcher = LLMatcher(tokenizer, compiled.grammar, log_level=0)
    if matcher.is_error():
        return True, [matcher.get_error()], None
    compiled.keep(tokenizer, matcher)
    return False, matcher.get_grammar_warnings(), matcher.deep_copy()


def parse_message(
    message: str, kind: str, severity: Literal["error", "warning"] = "error"
) -> Diagnostic:
    """Turn an llguidance error or warning into a Diagnostic with line and column if given."""
    head, _, detail = message.strip("\n").partition("\n")
    line = column = None
    if found := _POSITION.match(head):
        head = head[found.end() :]
        if kind == "lark":  # other kinds are wrapped or converted: positions would mislead
            line, column = int(found.group(1)), int(found.group(2))  # both 1-based
    if head.endswith(":") and (found := _DETAIL_ERROR.search(detail)):
        head = f"{head[:-1]}: {found.group(1)}"  # regex errors put the reason below the excerpt
    if head in _STOP_REASONS:  # the first mask is empty: nothing can ever match
        head = "the constraint cannot produce any text: nothing can satisfy it"
        detail = ""
    if kind == "gbnf" and detail:
        head += " (in the grammar converted from GBNF)"
    if found := _UNIMPLEMENTED.search(head):
        head = (
            f"JSON schema keywords not supported: {found.group(1)}; Corral cannot enforce them "
            '(add "x-guidance": {"lenient": true} to the schema to ignore them)'
        )
    elif "coerce_one_of" in head:
        head += ' (add "x-guidance": {"coerce_one_of": true} to the schema)'
    return Diagnostic(head.strip(), line, column, severity, detail)


def _language_problems(
    report: ValidationReport,
    grammar: str,
    matcher: LLMatcher | None,
    tokenizer: llguidance.LLTokenizer | None,
) -> list[Diagnostic]:
    """Errors for grammars no text can satisfy; a warning for ones only the empty text can.

    `matcher` is a fresh one for `tokenizer` if there is one, which this advances."""
    from engine.constraints.tokenizer import byte_tokenizer

    tok = tokenizer or byte_tokenizer()
    if matcher is None:
        matcher = LLMatcher(tok, grammar, log_level=0)
    forced_text = False
    for _ in range(_FOLLOW_FORCED):  # follow forced text: a dead end may wait behind it
        mask = np.frombuffer(matcher.compute_bitmask(), np.uint8)
        if matcher.is_error():
            return [parse_message(matcher.get_error(), report.spec.kind)]
        bits = np.unpackbits(mask, bitorder="little")
        bits[[t for t in tok.eos_tokens if t < bits.size]] = 0
        forced = matcher.compute_ff_tokens()
        if not forced or not matcher.consume_tokens(forced):
            break
        forced_text = True
    if matcher.is_error():
        return [parse_message(matcher.get_error(), report.spec.kind)]
    if bits.any():
        return []
    if matcher.is_accepting():
        if not forced_text:
            report.warnings.append(
                Diagnostic("the constraint only matches the empty text", severity="warning")
            )
        return []
    return [parse_message("NoExtension", report.spec.kind)]
