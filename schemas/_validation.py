"""Deterministic validation of tool-call arguments against a tool's JSON Schema (used inside workflows).

A built-in tool's schema is ours; a schema from another source (an MCP server's input schema, a
server's elicitation schema) is untrusted input: it is applied with remote and file references
refused (an empty ``referencing`` registry: nothing is fetched or read), its ``pattern`` keywords
matched with RE2 (linear time: no pattern can stall a workflow task), ``patternProperties``
refused, the ``format``s of ``CHECKED_FORMATS`` checked, and any error of the schema itself
reported as a problem instead of raised.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import re2
import referencing
from jsonschema import validators
from jsonschema.exceptions import ValidationError

from agentrt.schemas._messages import ToolSpec

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "NotAJsonNumber",
    "argument_problems",
    "arguments_sha256",
    "nested_deeper_than",
    "strict_json",
    "untrusted_schema_problems",
]

# The deepest a caller's edited tool-call arguments may nest lists and objects (levels, the
# arguments object itself counted as 1). Deeper ones are refused before they are sent: the data
# converter stops serializing at some hundreds of levels and JSON parsers at about a thousand.
MAX_ARGUMENT_DEPTH = 64

# Compiled RE2 patterns kept per process (an untrusted schema's patterns are few and reused).
RE2_CACHE_SIZE = 512


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` levels deep (``value`` itself,
    if a list or dict, is level 1); walked with a stack of its own, so any depth is measured
    without a ``RecursionError``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def argument_problems(spec: ToolSpec, arguments: Any) -> list[str]:
    """Return readable problems (``"path: 'path' is a required property"``); empty when valid.

    Validation follows JSON Schema draft 2020-12 (jsonschema's ``Draft202012Validator``). A spec
    with a ``source`` (not a built-in tool) is validated as untrusted (see the module); a schema
    that cannot be applied gives one problem saying so, never an exception.
    """
    if spec.source is None:
        validator = jsonschema.Draft202012Validator(spec.parameters)
        return _problems(validator.iter_errors(arguments))
    return untrusted_schema_problems(spec.parameters, arguments)


def untrusted_schema_problems(schema: Any, instance: Any) -> list[str]:
    """``instance``'s problems against ``schema``, a JSON Schema from an untrusted source: no
    reference leaves the schema, patterns run on RE2, an unusable schema is one problem."""
    try:
        validator = _UntrustedValidator(schema, registry=_NO_REFERENCES, format_checker=_FORMATS)
        return _problems(validator.iter_errors(instance))
    except Exception as err:  # noqa: BLE001 - whatever a hostile schema makes jsonschema raise is a problem, not a crash
        return [f"(schema): the tool's input schema cannot be applied ({type(err).__name__})"]


# The longest text one argument problem keeps (characters).
PROBLEM_CHARS = 500


def _problems(errors: Iterator[ValidationError]) -> list[str]:
    problems = []
    for error in sorted(errors, key=lambda e: list(map(str, e.path))):
        where = "/".join(str(p) for p in error.path) or "(arguments)"
        message = error.message  # jsonschema repeats the offending value: keep a readable head of it
        if len(message) > PROBLEM_CHARS:
            message = f"{message[:PROBLEM_CHARS]}… [{len(message) - PROBLEM_CHARS} more characters]"
        problems.append(f"{where}: {message}")
    return problems


@functools.lru_cache(maxsize=RE2_CACHE_SIZE)
def _re2(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the call's problem, not a line on the worker's stderr
    return re2.compile(pattern, options)


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    if not isinstance(pattern, str):
        yield ValidationError(f"the schema's pattern {pattern!r} is not a string")
        return
    try:
        compiled = _re2(pattern)
    except Exception:  # noqa: BLE001 - re2.error, or a pattern RE2 refuses (look-around, back-references)
        yield ValidationError(f"the schema's pattern {pattern[:200]!r} is not supported (RE2 syntax only)")
        return
    if not compiled.search(instance):
        yield ValidationError(f"{instance[:200]!r} does not match {pattern[:200]!r}")


def _refused(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    yield ValidationError("the schema's patternProperties are not supported (a server's schema may not hold them)")


_UntrustedValidator = validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _pattern, "patternProperties": _refused}
)
_NO_REFERENCES: referencing.Registry[Any] = referencing.Registry()
# The formats an untrusted schema's ``format`` checks (jsonschema's checkers for them; not
# ``regex``, which would compile a given pattern with Python's ``re``).
CHECKED_FORMATS = ("email", "idn-email", "date", "ipv4", "ipv6", "uuid", "hostname")
_FORMATS = jsonschema.FormatChecker(formats=[f for f in CHECKED_FORMATS if f in jsonschema.FormatChecker.checkers])


def arguments_sha256(arguments: dict[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON (sorted keys, no spaces) of ``arguments``."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class NotAJsonNumber(ValueError):
    """A number JSON cannot carry, in text a model wrote: ``NaN``, ``Infinity``, ``-Infinity``
    (which Python's reader takes and RFC 8259 has not), or one too large for a 64-bit float
    (``1e999``, which Python reads as infinity). Kept, it would reach a tool or a caller as ``nan``
    here and as ``null`` after a trip through workflow history. ``str()`` is a phrase to follow
    "holds": ``NaN, which is not a JSON number``."""


def strict_json(text: str) -> Any:
    """``json.loads(text)`` that refuses what JSON numbers cannot be.

    Raises ``NotAJsonNumber`` for ``NaN``, ``Infinity``, ``-Infinity`` and numbers past a 64-bit
    float's range; ``ValueError`` (``json.JSONDecodeError``) for text that is not JSON;
    ``RecursionError`` for nesting past Python's recursion limit."""
    return json.loads(text, parse_constant=_not_a_number, parse_float=_finite)


def _not_a_number(word: str) -> Any:
    raise NotAJsonNumber(f"{word}, which is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise NotAJsonNumber(f"{text[:40]}, a number too large for a 64-bit float")
    return number
