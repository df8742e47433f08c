"""An independent judge of the tight rewrite's narrowings, for the tests.

The tight schema may reject a valid instance only for what it means to narrow: an
undeclared key where no subschema said anything about extra keys, a number beyond
±(2^53-1) or with more than 6 decimals, a free-form value nested too deep. `narrowed`
applies exactly those narrowings to a valid instance, reading the schema as written with
jsonschema's own reference resolution (`referencing`), not with anything tight.py uses. A
rejection is explained when the narrowed instance is valid under both schemas; the same
check shows the tight schema still has a valid instance wherever that one was valid.

Numbers are judged as JSON text is, in decimal: jsonschema's float `multipleOf` says 3.2
is not a multiple of 1e-6 (3.2 / 1e-6 is 3199999.9999999995 in binary), which llguidance,
generating decimal digits, does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import jsonschema
import referencing.jsonschema
from jsonschema.exceptions import ValidationError
from referencing import Registry

from engine.constraints.tight import FRACTION_DIGITS, FREE_DEPTH, MAX_SAFE_INTEGER

ANNOTATIONS = {"title", "description", "default", "examples", "$comment", "$schema", "$id"}
ANNOTATIONS |= {"id", "format", "deprecated", "readOnly", "writeOnly", "markdownDescription"}
OLD_DRAFTS = (
    jsonschema.Draft3Validator,
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
)


def _decimal_multiple_of(
    validator: Any, step: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "number"):
        return
    try:
        exact = Decimal(repr(instance)) % Decimal(repr(step)) == 0
    except InvalidOperation:  # a quotient too large for the context: not a multiple
        exact = False
    if not exact:
        yield ValidationError(f"{instance!r} is not a multiple of {step!r}")


def validator(schema: Any) -> Any:
    """A jsonschema validator for `schema` (by its `$schema`, else 2020-12) that reads
    `multipleOf` in decimal."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    exact = jsonschema.validators.extend(cls, {"multipleOf": _decimal_multiple_of})
    return exact(schema)


class Oracle:
    """The intended narrowing of instances of one schema as written."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self.check = validator(schema)
        self.old_draft = isinstance(self.check, OLD_DRAFTS)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        spec = referencing.jsonschema.specification_with(
            cls.META_SCHEMA["$schema" if "$schema" in cls.META_SCHEMA else "$id"],
            default=referencing.jsonschema.DRAFT202012,
        )
        self.resolver = Registry().resolver_with_root(spec.create_resource(schema))

    def narrowed(self, instance: Any) -> Any:
        """`instance` with the tight defaults' intended narrowings applied."""
        return self._narrow(instance, self._applying(self.schema, instance, self.resolver))

    # -- which subschemas apply to one instance, as jsonschema evaluates them --

    def _applying(self, node: Any, instance: Any, resolver: Any) -> list[tuple[Any, Any]]:
        found: list[tuple[Any, Any]] = []
        self._collect(node, instance, resolver, found, 0)
        return found

    def _collect(
        self, node: Any, instance: Any, resolver: Any, found: list[tuple[Any, Any]], depth: int
    ) -> None:
        if depth > 40 or not isinstance(node, dict) and node is not True:
            return
        if node is True:
            found.append((node, resolver))
            return
        if isinstance(node.get("$ref"), str):
            resolved = resolver.lookup(node["$ref"])
            self._collect(resolved.contents, instance, resolved.resolver, found, depth + 1)
            if self.old_draft:
                return  # drafts up to 7 ignore a reference's siblings
        found.append((node, resolver))
        for child in node.get("allOf") or []:
            self._collect(child, instance, resolver, found, depth + 1)
        for key in ("anyOf", "oneOf"):
            for child in node.get(key) or []:
                if self._valid(child, instance):
                    self._collect(child, instance, resolver, found, depth + 1)
        if "if" in node:
            passed = self._valid(node["if"], instance)
            if passed:
                self._collect(node["if"], instance, resolver, found, depth + 1)
            branch = node.get("then" if passed else "else")
            if branch is not None:
                self._collect(branch, instance, resolver, found, depth + 1)
        if isinstance(instance, dict):
            for key in ("dependentSchemas", "dependencies"):
                for name, child in (node.get(key) or {}).items():
                    if name in instance and isinstance(child, dict | bool):
                        self._collect(child, instance, resolver, found, depth + 1)

    def _valid(self, node: Any, instance: Any) -> bool:
        return bool(self.check.evolve(schema=node).is_valid(instance))

    # -- the narrowing --

    def _narrow(self, value: Any, applying: list[tuple[Any, Any]]) -> Any:
        schemas = [s for s, _ in applying if isinstance(s, dict)]
        if applying and all(s is True or not set(s) - ANNOTATIONS for s, _ in applying):
            return _cut(value, FREE_DEPTH)
        if not applying:
            return _cut(value, FREE_DEPTH - 1)  # nothing describes it: a free value
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return _number(value, schemas)
        if isinstance(value, dict):
            keep = _declared(schemas)
            out = {}
            for key, child in value.items():
                if keep is None or key in keep:
                    out[key] = self._narrow(child, self._child(applying, key, child))
            return out
        if isinstance(value, list):
            return [self._narrow(v, self._item(applying, i, v)) for i, v in enumerate(value)]
        return value

    def _child(self, applying: list[tuple[Any, Any]], key: str, child: Any) -> list:
        found: list[tuple[Any, Any]] = []
        for node, resolver in applying:
            if not isinstance(node, dict):
                continue
            properties = node.get("properties") or {}
            matched = key in properties
            if matched:
                self._collect(properties[key], child, resolver, found, 0)
            for pattern, sub in (node.get("patternProperties") or {}).items():
                if re.search(pattern, key):
                    matched = True
                    self._collect(sub, child, resolver, found, 0)
            if not matched and "additionalProperties" in node:
                self._collect(node["additionalProperties"], child, resolver, found, 0)
        return found

    def _item(self, applying: list[tuple[Any, Any]], i: int, item: Any) -> list:
        found: list[tuple[Any, Any]] = []
        for node, resolver in applying:
            if not isinstance(node, dict):
                continue
            prefix = node.get("prefixItems")
            items = node.get("items")
            if isinstance(prefix, list) and i < len(prefix):
                self._collect(prefix[i], item, resolver, found, 0)
            elif isinstance(items, list):
                if i < len(items):
                    self._collect(items[i], item, resolver, found, 0)
                elif "additionalItems" in node:
                    self._collect(node["additionalItems"], item, resolver, found, 0)
            elif items is not None:
                self._collect(items, item, resolver, found, 0)
            if "contains" in node and self._valid(node["contains"], item):
                self._collect(node["contains"], item, resolver, found, 0)
        return found


def _declared(schemas: list[dict[str, Any]]) -> set[str] | None:
    """The keys the subschemas applying to an object declare; None where one of them says
    something about extra keys (nothing then is an intended narrowing)."""
    keys: set[str] = set()
    for node in schemas:
        if "patternProperties" in node or "unevaluatedProperties" in node:
            return None
        if "additionalProperties" in node and node["additionalProperties"] is not False:
            return None
        keys |= set(node.get("properties") or {})
        keys |= {k for k in node.get("required") or [] if isinstance(k, str)}
        for key in ("dependentRequired", "dependencies", "dependentSchemas"):
            for name, needed in (node.get(key) or {}).items():
                keys.add(name)
                if isinstance(needed, list):
                    keys |= {k for k in needed if isinstance(k, str)}
    return keys or None


def _number(value: int | float, schemas: list[dict[str, Any]]) -> int | float:
    low = any(k in s for s in schemas for k in ("minimum", "exclusiveMinimum"))
    high = any(k in s for s in schemas for k in ("maximum", "exclusiveMaximum"))
    if value > MAX_SAFE_INTEGER and not high:
        return MAX_SAFE_INTEGER
    if value < -MAX_SAFE_INTEGER and not low:
        return -MAX_SAFE_INTEGER
    if isinstance(value, float) and not any("multipleOf" in s for s in schemas):
        exponent = Decimal(repr(value)).as_tuple().exponent
        if isinstance(exponent, int) and exponent < -FRACTION_DIGITS:
            return round(value, FRACTION_DIGITS)
    return value


def _cut(value: Any, level: int) -> Any:
    """A free value nested at most `level` containers deep (deeper ones become null),
    numbers narrowed as free numbers are."""
    if isinstance(value, dict | list) and level <= 0:
        return None
    if isinstance(value, dict):
        return {k: _cut(v, level - 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, level - 1) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _number(value, [])
    return value
