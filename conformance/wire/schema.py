"""The wire protocol's JSON Schema (protocol-1.schema.json, shipped in the package) and the small
validator the suite checks every response header with.

The validator knows the keywords the schema uses and no others: type, enum, const, properties,
required, additionalProperties, propertyNames, items, prefixItems, minItems, maxItems, minimum,
minLength, maxLength, pattern, $ref (to this document's own $defs), allOf and anyOf. A schema
with any other keyword is refused when it is read (tests/test_wire.py reads the shipped
one), so a keyword added to the document cannot be silently ignored here. A full validator
(jsonschema) is not a dependency of the suite; this one is enough for its own document.

The first problem found is reported as one line: where (response.arrays[0].shape[1]), the rule
and what came instead."""

from __future__ import annotations

import functools
import json
import os
import re

SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol-1.schema.json")
KNOWN = {
    "$schema",
    "$id",
    "title",
    "description",
    "$defs",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "minLength",
    "maxLength",
    "pattern",
    "$ref",
    "allOf",
    "anyOf",
}
# containers of schemas (named or listed), not keywords: their keys are names
_NAMED = {"properties", "$defs", "requests", "responses"}


class SchemaViolation(ValueError):
    """A document that does not follow the schema: `where` it went wrong and the rule, in one line."""


@functools.cache
def document() -> dict:
    with open(SCHEMA_FILE, encoding="utf-8") as f:
        schema = json.load(f)
    unknown = sorted(_unknown_keywords(schema))
    if unknown:
        raise ValueError(f"{SCHEMA_FILE}: keywords this validator does not know: {', '.join(unknown)}")
    return schema


def _unknown_keywords(node, named: bool = False) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if named:  # a name of a property or definition, whose value is a schema (or a group of them)
                found |= _unknown_keywords(value, named=key in _NAMED)
                continue
            if key not in KNOWN and key not in _NAMED:
                found.add(key)
            if key in ("enum", "const"):
                continue
            found |= _unknown_keywords(value, named=key in _NAMED)
    elif isinstance(node, list):
        for item in node:
            found |= _unknown_keywords(item)
    return found


def definition(path: str) -> dict:
    """The schema at "#/$defs/..." (e.g. "#/$defs/responses/embed")."""
    node = document()
    for part in path.removeprefix("#/").split("/"):
        node = node[part]
    return node


def validate(instance, path: str, where: str = "response") -> None:
    """Raises SchemaViolation naming the first place `instance` breaks the schema at `path`."""
    problem = _check(instance, definition(path), where)
    if problem:
        raise SchemaViolation(problem)


def _type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is(value, kind: str) -> bool:
    name = _type_name(value)
    return name == kind or (kind == "number" and name == "integer")


def _shown(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(value, schema: dict, where: str) -> str | None:  # noqa: C901 - one branch per keyword
    if "$ref" in schema:
        problem = _check(value, definition(schema["$ref"]), where)
        if problem:
            return problem
    for part in schema.get("allOf", ()):
        problem = _check(value, part, where)
        if problem:
            return problem
    if "anyOf" in schema:
        problems = [_check(value, part, where) for part in schema["anyOf"]]
        if all(problems):
            return next(p for p in problems if p)
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, k) for k in kinds):
            return f"{where}: {_shown(value)} is {_type_name(value)}, but should be {' or '.join(kinds)}"
    if "const" in schema and (value != schema["const"] or _type_name(value) != _type_name(schema["const"])):
        return f"{where}: {_shown(value)}, but should be {_shown(schema['const'])}"
    if "enum" in schema and not any(value == e and _type_name(value) == _type_name(e) for e in schema["enum"]):
        return f"{where}: {_shown(value)} is not one of {', '.join(map(_shown, schema['enum']))}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where}: {_shown(value)} is shorter than {schema['minLength']} character(s)"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where}: a string of {len(value)} characters, longer than {schema['maxLength']}"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{where}: {_shown(value)} does not match {schema['pattern']}"
    if _is(value, "number") and not isinstance(value, bool) and "minimum" in schema and value < schema["minimum"]:
        return f"{where}: {_shown(value)} is less than the minimum {schema['minimum']}"
    if isinstance(value, dict):
        return _check_object(value, schema, where)
    if isinstance(value, list):
        return _check_array(value, schema, where)
    return None


def _check_object(value: dict, schema: dict, where: str) -> str | None:
    missing = [k for k in schema.get("required", ()) if k not in value]
    if missing:
        return f"{where}: field {missing[0]!r} is missing"
    properties = schema.get("properties", {})
    for key, item in value.items():
        if "propertyNames" in schema:
            problem = _check(key, schema["propertyNames"], f"{where} key {key!r}")
            if problem:
                return problem
        if key in properties:
            problem = _check(item, properties[key], f"{where}.{key}")
        elif schema.get("additionalProperties", True) is False:
            return f"{where}: field {key!r} is not part of the protocol here"
        elif isinstance(schema.get("additionalProperties"), dict):
            problem = _check(item, schema["additionalProperties"], f"{where}.{key}")
        else:
            problem = None
        if problem:
            return problem
    return None


def _check_array(value: list, schema: dict, where: str) -> str | None:
    if len(value) < schema.get("minItems", 0):
        return f"{where}: {len(value)} item(s), but should have at least {schema['minItems']}"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{where}: {len(value)} item(s), but should have at most {schema['maxItems']}"
    prefix = schema.get("prefixItems", [])
    for i, item in enumerate(value):
        if i < len(prefix):
            problem = _check(item, prefix[i], f"{where}[{i}]")
        elif schema.get("items", True) is False:
            return f"{where}: {len(value)} item(s), but should have at most {len(prefix)}"
        elif isinstance(schema.get("items"), dict):
            problem = _check(item, schema["items"], f"{where}[{i}]")
        else:
            problem = None
        if problem:
            return problem
    return None
