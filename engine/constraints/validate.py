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

import json
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import llguidance
import numpy as np
from llguidance import LLMatcher

from engine.constraints import ConstraintError, Diagnostic
from engine.constraints.compiled import CompiledGrammar
from engine.constraints.gbnf import gbnf_to_grammar
from engine.constraints.limits import check_lark, check_schema
from engine.constraints.sources import ANY_JSON_SCHEMA, parse_json_schema
from engine.constraints.tight import tighten
from engine.types import ConstraintSpec, SchemaOptions, ValidationReport

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


def json_compile_options(options: SchemaOptions) -> JsonCompileOptions:
    """llguidance's JSON options for `options`: compact, and lenient unless strict."""
    found: JsonCompileOptions = dict(JSON_COMPILE_DEFAULTS)  # type: ignore[assignment]
    if options.lenient:
        found["lenient"] = True
    return found


def schema_for_grammar(schema: Any, options: SchemaOptions) -> tuple[Any, list[str]]:
    """The schema llguidance compiles for `schema` under `options` (tightened unless
    `options.tight` is off) and what the tight defaults did, in words."""
    if not options.tight:
        return schema, []
    tight = tighten(schema)
    if tight.unsatisfiable is not None:
        diag = Diagnostic(f"Unsatisfiable schema: {tight.unsatisfiable}, so nothing matches it")
        raise ConstraintError(str(diag), [diag])
    return tight.schema, tight.notes()


def compiled_grammar(spec: ConstraintSpec) -> CompiledGrammar:
    """A CompiledGrammar for `spec` (not compiled for a tokenizer yet); a tightened JSON
    schema keeps the schema as written to fall back on. Raises ConstraintError for errors
    found converting it."""
    grammar, notes = build_grammar(spec)
    fallback = None
    if notes:
        fallback = build_grammar(replace(spec, options=replace(spec.options, tight=False)))[0]
    return CompiledGrammar(grammar, notes, fallback)


def build_grammar(spec: ConstraintSpec) -> tuple[str, list[str]]:
    """The llguidance grammar for `spec` and what the tight defaults did to it (JSON schemas
    only); raises ConstraintError for errors found converting it.

    Cheap (no lexer is built); llguidance reports the remaining errors when a matcher or
    `validate_constraint` compiles the result.
    """
    kind = spec.kind
    defaults = json_compile_options(spec.options)
    if kind == "any_json":
        schema, notes = schema_for_grammar(ANY_JSON_SCHEMA, spec.options)
        return LLMatcher.grammar_from_json_schema(schema, defaults=defaults), notes
    if kind == "json_schema":
        label = spec.name or "JSON schema"
        literal = spec.source.strip()
        if literal == "false":
            diag = Diagnostic("Unsatisfiable schema: the schema is false, so nothing matches it")
            raise ConstraintError(f"{label}: {diag}", [diag])
        try:
            parsed = json.loads(spec.source)
        except (ValueError, RecursionError):
            parse_json_schema(spec.source, label)  # raises with line and column
            raise
        if not isinstance(parsed, dict | bool):
            parse_json_schema(spec.source, label)  # raises: not an object
        check_schema(parsed, label)  # before native code: too deep would crash it
        try:
            schema, notes = schema_for_grammar({} if parsed is True else parsed, spec.options)
        except ConstraintError as exc:  # proven to have no valid instance
            raise ConstraintError(f"{label}: {exc}", exc.diagnostics) from exc
        try:
            return LLMatcher.grammar_from_json_schema(schema, defaults=defaults), notes
        except ValueError as exc:
            diag = Diagnostic(str(exc))
            raise ConstraintError(f"{label}: {diag}", [diag]) from exc
    return to_grammar(spec), []


def to_grammar(spec: ConstraintSpec) -> str:
    """The llguidance grammar for `spec`; raises ConstraintError for errors found converting it."""
    kind = spec.kind
    if kind in ("any_json", "json_schema"):
        return build_grammar(spec)[0]
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
    return replace(spec, compiled=compiled_grammar(spec))


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
        compiled = compiled_grammar(spec)
    except ConstraintError as exc:
        report.errors = exc.diagnostics or [Diagnostic(str(exc))]
        compiled = None
    while compiled is not None:
        report.errors, report.warnings = [], []
        is_error, messages, matcher = _compile_checks(compiled, tokenizer)
        diags = [parse_message(m, spec.kind, "error" if is_error else "warning") for m in messages]
        if is_error and spec.kind == "json_schema":
            diags = [_with_places(d, compiled) for d in diags]
        if is_error:
            report.errors.extend(diags)
        else:
            report.warnings.extend(diags)
        if check_language and not is_error:
            report.errors.extend(_language_problems(report, compiled.grammar, matcher, tokenizer))
        # The tightened schema hit an llguidance limit (or a corner the rewrite made
        # empty): the schema as written, without the tight defaults, is checked instead.
        if report.errors and compiled.use_fallback():
            continue
        report.tight = list(compiled.notes)
        if not report.errors:
            report.spec = replace(spec, compiled=compiled)
            report.grammar = compiled.grammar
        break
    report.check_ms = (time.perf_counter() - started) * 1e3
    return report


def _with_places(diag: Diagnostic, compiled: CompiledGrammar) -> Diagnostic:
    """A refusal for `not` (strict schemas) that says where the ones Corral could not
    rewrite stand in the schema llguidance got, and what they are over."""
    if '"not"' not in diag.message or "not supported" not in diag.message:
        return diag
    grammars = compiled.grammars()
    schema = grammars[0].get("json_schema") if len(grammars) == 1 else None
    places = unenforced_nots(schema)
    if not places:
        return diag
    parts = []
    for what, pointers in places.items():
        more = len(pointers) - _MAX_PLACES
        listed = ", ".join(p or "the top level" for p in pointers[:_MAX_PLACES])
        parts.append(f"{what} at {listed}" + (f" and {more} more" if more > 0 else ""))
    head, _, tail = diag.message.partition("; Corral cannot enforce them")
    message = f"{head}; Corral cannot enforce them ({'; '.join(parts)}){tail}"
    return replace(diag, message=message)


_MAX_PLACES = 3


def unenforced_nots(schema: Any) -> dict[str, list[str]]:
    """Where each `not` stands in `schema` (as llguidance gets it: what the tight rewrite
    could not enforce), by what it is over: a key-pattern complement (`propertyNames`,
    `patternProperties`), an `allOf`, or other keywords."""
    from engine.constraints.tight_refs import subschemas

    found: dict[str, list[str]] = {}
    for pointer, node in subschemas(schema):
        if "not" not in node:
            continue
        inner = node["not"]
        keys = set(inner) if isinstance(inner, dict) else set()
        if keys & {"propertyNames", "patternProperties"}:
            what = "a key-pattern complement (a not over propertyNames or patternProperties)"
        elif "allOf" in keys or "oneOf" in keys:
            what = "a not over an allOf or oneOf"
        else:
            what = "a not over " + (", ".join(sorted(keys)) or "a schema")
        found.setdefault(what, []).append(pointer)
    return found


def _compile_checks(
    compiled: CompiledGrammar, tokenizer: llguidance.LLTokenizer | None
) -> tuple[bool, list[str], LLMatcher | None]:
    """(is_error, llguidance's errors or warnings, a matcher for the language check).

    With the model's tokenizer this is the grammar's one compile: the matcher is kept on
    `compiled` for requests to copy. Without one, llguidance checks the grammar alone.
    """
    if tokenizer is None:
        is_error, messages = LLMatcher.validate_grammar_with_warnings(compiled.grammar, None)
        if not is_error:
            compiled.warnings = tuple(messages)
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
    if (found := _UNIMPLEMENTED.search(head)) and severity == "warning":
        head = f"JSON schema keywords not enforced (ignored): {found.group(1)}"
    elif found:
        head = (
            f"JSON schema keywords not supported: {found.group(1)}; Corral cannot enforce them "
            '(add "x-guidance": {"lenient": true} to the schema to ignore them)'
        )
    elif head.startswith("Unknown format:") and severity == "warning":
        head += " (not enforced)"
    elif head.startswith("oneOf not fully supported"):
        head = "oneOf is enforced as anyOf here: a reply may match more than one of its branches"
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


def constraint_notes(constraint: ConstraintSpec) -> tuple[list[str], list[str]]:
    """(what llguidance relaxed in `constraint`'s compiled grammar, as warnings; what the
    tight defaults did to it), both in words; empty before it is compiled."""
    compiled = constraint.compiled
    if compiled is None:
        return [], []
    warnings = [str(parse_message(m, constraint.kind, "warning")) for m in compiled.warnings]
    return warnings, list(compiled.notes)
