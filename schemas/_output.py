"""Structured output: the JSON Schema a turn's final answer must match (``OutputSpec``), and
its check (``check_output``), run by the model activity on the model's untrusted answer.

A spec travels in history (on ``SessionConfig.output``, ``SendMessageInput.output`` and each
model call's input), so it holds a JSON Schema, never a Python class: ``OutputSpec.from_type``
derives the schema from a pydantic model (or any type pydantic can describe), and
``TurnOutcome.output_as`` turns the validated object back into that type on the caller's side.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pydantic import Field, TypeAdapter, ValidationError, field_validator

from agentrt.schemas._base import Model
from agentrt.schemas._errors import ConfigurationError
from agentrt.schemas._messages import ToolSpec
from agentrt.schemas._validation import NotAJsonNumber, strict_json, untrusted_schema_problems

__all__ = [
    "InvalidOutputSchema",
    "OUTPUT_TOOL",
    "OutputCheck",
    "OutputSpec",
    "check_output",
    "output_spec",
    "unsupported_keyword",
]

T = TypeVar("T")

# The tool a model calls to give its final answer when the provider has no native mode
# (or the profile asks for ``output_mode = "tool"``); pydantic-ai's name for it.
OUTPUT_TOOL = "final_result"
# Bounds of a spec (it is in history with every model call of its turns).
MAX_SCHEMA_BYTES = 32 * 1024
MAX_ATTEMPTS = 10
# Bounds of one answer's check: characters of the answer, nesting depth and values of its JSON,
# and Python calls the validator may make (a hostile schema and answer could otherwise make a
# validation take exponential time; RE2 runs the schema's patterns in linear time).
MAX_ANSWER_CHARS = 1_000_000
MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_VALIDATOR_CALLS = 500_000
# The problems fed back to the model (and kept in events) per attempt.
MAX_PROBLEMS = 20

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


class InvalidOutputSchema(ConfigurationError):
    """An output type or JSON Schema that cannot be a turn's output spec: not a JSON object
    schema, not a valid JSON Schema, larger than ``MAX_SCHEMA_BYTES``, or a bad name.
    ``problem`` says which."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"invalid output schema: {problem}")


class OutputSpec(Model):
    """What a turn's final answer must be: a JSON object matching ``json_schema``.

    - ``name``: the schema's name (1 to 64 of ``A-Z a-z 0-9 _ -``; OpenAI's rule), sent as the
      native mode's schema name; ``description`` tells the model what the object is.
    - ``json_schema``: a JSON Schema (draft 2020-12) whose root is ``"type": "object"``, at
      most 32 KiB as JSON; ``$ref`` only inside it (``#/$defs/...``), patterns in RE2 syntax.
    - ``strict``: sent as OpenAI's ``strict`` (the schema must then be in OpenAI's strict
      subset: every property required, ``additionalProperties: false``).
    - ``max_attempts``: answers the model may give (1 to 10); each invalid one gets its
      validation errors back as a user message, and the last one ends the turn ``output_invalid``.

    Build one with ``OutputSpec.from_type(Triage)`` or ``OutputSpec.from_schema({...})``.
    """

    name: str = "output"
    description: str | None = Field(default=None, exclude_if=lambda v: v is None)
    json_schema: dict[str, Any]
    strict: bool = False
    max_attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)

    @field_validator("name")
    @classmethod
    def _name_is_valid(cls, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise ValueError(f"name {name[:80]!r} must be 1 to 64 of A-Z a-z 0-9 _ -")
        return name

    @field_validator("json_schema")
    @classmethod
    def _schema_is_usable(cls, schema: dict[str, Any]) -> dict[str, Any]:
        problem = schema_problem(schema)
        if problem is not None:
            raise ValueError(problem)
        return schema

    @classmethod
    def from_schema(
        cls, schema: dict[str, Any], *, name: str | None = None, strict: bool = False, max_attempts: int = 3
    ) -> OutputSpec:
        """A spec from a JSON Schema dict (``name`` defaults to its ``title``, else ``output``).
        Raises ``InvalidOutputSchema``."""
        title = schema.get("title") if isinstance(schema, dict) else None
        name = name or (title if isinstance(title, str) and _NAME.fullmatch(title) else "output")
        description = schema.get("description") if isinstance(schema, dict) else None
        try:
            spec = cls(
                name=name, description=description if isinstance(description, str) else None,
                json_schema=schema, strict=strict, max_attempts=max_attempts,
            )
        except ValueError as err:  # pydantic's ValidationError is one
            raise InvalidOutputSchema(_first_error(err)) from None
        problem = unsupported_keyword(schema)
        if problem is not None:
            raise InvalidOutputSchema(problem)
        return spec

    @classmethod
    def from_type(cls, output_type: Any, *, name: str | None = None, strict: bool = False, max_attempts: int = 3) -> OutputSpec:
        """A spec from a pydantic model class (or a dataclass or ``TypedDict``: any type pydantic
        describes as a JSON object); ``name`` defaults to the type's name. Raises
        ``InvalidOutputSchema`` (a type pydantic cannot describe, or not an object)."""
        try:
            schema = TypeAdapter(output_type).json_schema()
        except Exception as err:  # noqa: BLE001 - pydantic's PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, ...
            raise InvalidOutputSchema(f"{output_type!r} has no JSON Schema: {err}") from None
        schema = _root_inlined(schema)
        type_name = getattr(output_type, "__name__", None)
        return cls.from_schema(
            schema, name=name or (type_name if isinstance(type_name, str) and _NAME.fullmatch(type_name) else None),
            strict=strict, max_attempts=max_attempts,
        )

    def tool_spec(self) -> ToolSpec:
        """The output tool (``final_result``), for a provider with no native mode."""
        description = "Give your final answer by calling this tool with it as the arguments."
        if self.description:
            description = f"{description} {self.description}"
        return ToolSpec(name=OUTPUT_TOOL, description=description, parameters=self.json_schema)


def _root_inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic describes a model that refers to itself (``children: list[Node]``) as
    ``{"$defs": {"Node": {...}}, "$ref": "#/$defs/Node"}``: the definition becomes the root, its
    ``$defs`` kept beside it, so that the root is the object and every ``$ref`` still resolves."""
    ref, defs = schema.get("$ref"), schema.get("$defs")
    if set(schema) != {"$ref", "$defs"} or not isinstance(ref, str) or not isinstance(defs, dict):
        return schema
    target = defs.get(ref.removeprefix("#/$defs/")) if ref.startswith("#/$defs/") else None
    if not isinstance(target, dict) or "$defs" in target:
        return schema
    return {**target, "$defs": defs}


def output_spec(output_type: Any) -> OutputSpec | None:
    """The spec for what an agent is given as its output type: None for plain text (``None``,
    ``str``), the spec itself, ``from_schema`` for a dict, ``from_type`` for anything else."""
    if output_type is None or output_type is str:
        return None
    if isinstance(output_type, OutputSpec):
        return output_type
    if isinstance(output_type, dict):
        return OutputSpec.from_schema(output_type)
    return OutputSpec.from_type(output_type)


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be an output schema, or None."""
    if not isinstance(schema, dict):
        return "the schema must be a JSON object"
    if _depth_over(schema, MAX_DEPTH):
        return f"the schema nests deeper than {MAX_DEPTH} levels"
    try:
        size = len(json.dumps(schema, separators=(",", ":")))
    except (TypeError, ValueError):
        return "the schema must be JSON (strings, numbers, booleans, null, lists and objects)"
    if size > MAX_SCHEMA_BYTES:
        return f"the schema is {size} bytes as JSON, more than {MAX_SCHEMA_BYTES}"
    if schema.get("type") != "object":
        return 'the schema\'s root must be "type": "object" (wrap another type in a model with one field)'
    import jsonschema  # here: the client imports this module, and most callers never build a spec

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        return f"not a valid JSON Schema: {err.message[:300]}"
    return _reference_problem(schema)


# Keywords whose subschemas apply to the same value as their own schema: a cycle of ``$ref``s
# through these alone never reaches a smaller part of the answer, so no answer can be checked.
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")


def _reference_problem(schema: dict[str, Any]) -> str | None:
    """A ``$ref`` that leaves the schema or points at nothing in it, a ``$dynamicRef``, or a cycle
    of references that never moves into the answer (``{"$defs": {"a": {"$ref": "#/$defs/a"}}}``):
    each would fail every answer's check with a problem no answer can fix."""
    import referencing.jsonschema  # here, as jsonschema above

    root = referencing.Registry().resolver_with_root(referencing.jsonschema.DRAFT202012.create_resource(schema))
    targets: dict[int, list[Any]] = {}
    for node in _subschemas(schema):
        if "$dynamicRef" in node:
            return "$dynamicRef is not supported; use $ref to #/$defs/..."
        if "$id" in node and node is not schema:
            return "$id is allowed at the schema's root only"
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#"):
                return f"$ref {ref[:200]!r} leaves the schema; refer to #/$defs/... only"
            try:
                target = root.lookup(ref).contents
            except Exception:  # noqa: BLE001 - referencing's Unresolvable and pointer errors
                return f"$ref {ref[:200]!r} points at nothing in the schema"
            targets[id(node)] = [target]
        in_place = targets.setdefault(id(node), [])
        for keyword in _IN_PLACE:
            value = node.get(keyword)
            if isinstance(value, dict) and keyword == "dependentSchemas":
                in_place.extend(value.values())
            elif isinstance(value, list):
                in_place.extend(value)
            elif isinstance(value, dict):
                in_place.append(value)
    if _has_cycle(targets):
        return "$ref loops back to itself without moving into the answer (a $ref cycle through $ref, allOf, anyOf, oneOf, not, if, then, else alone)"
    return None


# Keywords whose value maps names (not keywords) to subschemas, and keywords whose value is data.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
_DATA = frozenset({"enum", "const", "default", "examples", "required"})


def unsupported_keyword(schema: dict[str, Any]) -> str | None:
    """Why no answer could pass ``schema``'s check, or None: a ``pattern`` RE2 refuses
    (look-around, back-references) or a ``patternProperties``, anywhere in it. ``from_schema`` (so
    ``from_type``, an agent's ``output_type``, ``agent run --output-schema``) and the gateway's
    bodies refuse such a schema before any model is asked; a spec deserialized from history is
    not checked again. Walked without recursion; a property called ``pattern`` is a name."""
    from agentrt.schemas._validation import _re2  # here: re2 loads only for a spec being built

    for node in _subschemas(schema):
        if "patternProperties" in node:
            return "patternProperties are not supported (use properties, or additionalProperties)"
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            try:
                _re2(pattern)
            except Exception:  # noqa: BLE001 - re2.error, or a pattern RE2 refuses
                return f"the pattern {pattern[:200]!r} is not RE2 syntax (no look-around, no back-references)"
    return None


def _subschemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every subschema of ``schema``, the root first, each once, walked without recursion. The
    values of ``properties``, ``$defs`` and the like are subschemas and their keys names (a
    property called ``pattern`` or ``$ref`` is a name); ``enum``, ``const``, ``default``,
    ``examples`` and ``required`` hold data, not schemas."""
    stack: list[Any] = [schema]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            if key in _SCHEMA_MAPS and isinstance(value, dict):
                stack.extend(value.values())
            elif key not in _DATA:
                stack.append(value)


def _has_cycle(edges: dict[int, list[Any]]) -> bool:
    """Whether the graph of schemas by ``edges`` (by ``id``) holds a cycle; iterative DFS."""
    state: dict[int, int] = {}  # 1: on the path, 2: done
    for start in list(edges):
        if state.get(start):
            continue
        path: list[tuple[int, Any]] = [(start, iter(edges.get(start, [])))]
        state[start] = 1
        while path:
            node, children = path[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                path.pop()
                continue
            key = id(child)
            if state.get(key) == 1:
                return True
            if not state.get(key):
                state[key] = 1
                path.append((key, iter(edges.get(key, []))))
    return False


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts deeper than ``limit``; walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


class OutputCheck(Model):
    """An answer's check: ``output`` (the parsed object) when it matches, else ``problems``
    (readable, at most ``MAX_PROBLEMS``, e.g. ``"priority: 'urgent' is not one of ['low', 'high']"``)."""

    output: dict[str, Any] | None = None
    problems: list[str] = Field(default_factory=list)


def check_output(spec: OutputSpec, answer: str) -> OutputCheck:
    """Parse ``answer`` (JSON text, optionally in a ```json fence) and validate it against
    ``spec.json_schema``, within bounds: an answer longer than ``MAX_ANSWER_CHARS``, nested
    deeper than ``MAX_DEPTH`` or holding more than ``MAX_VALUES`` values, and a validation that
    needs more than ``MAX_VALIDATOR_CALLS`` calls, are problems, never a hang. Never raises."""
    if len(answer) > MAX_ANSWER_CHARS:
        return OutputCheck(problems=[f"(answer): {len(answer)} characters, more than {MAX_ANSWER_CHARS}"])
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        value = strict_json(text)
    except RecursionError:
        return OutputCheck(problems=[f"(answer): nested deeper than {MAX_DEPTH}"])
    except NotAJsonNumber as err:
        return OutputCheck(problems=[f"(answer): holds {err}; JSON numbers are finite"])
    except ValueError as err:
        return OutputCheck(problems=[f"(answer): not JSON ({err}); answer with the JSON object only"])
    if not isinstance(value, dict):
        return OutputCheck(problems=[f"(answer): a JSON {type(value).__name__}, not an object"])
    shape = _shape_problem(value)
    if shape is not None:
        return OutputCheck(problems=[shape])
    try:
        problems = _within_calls(lambda: untrusted_schema_problems(spec.json_schema, value), MAX_VALIDATOR_CALLS)
    except _OverBudget:
        problems = ["(answer): the schema check took too long for this answer (simplify the answer)"]
    if problems:
        problems = [p.replace("(arguments)", "(answer)", 1).replace("the tool's input schema", "the output schema") for p in problems]
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
        return OutputCheck(problems=problems)
    return OutputCheck(output=value)


def _shape_problem(value: Any) -> str | None:
    """Depth and value count of parsed JSON, walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return f"(answer): more than {MAX_VALUES} values"
        if depth > MAX_DEPTH:
            return f"(answer): nested deeper than {MAX_DEPTH}"
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


class _OverBudget(BaseException):
    """Not an ``Exception``: the validator's own ``except Exception`` must not swallow it."""


def _within_calls(fn: Callable[[], T], budget: int) -> T:
    """``fn()``, stopped with ``_OverBudget`` once it has made ``budget`` Python calls. Counts
    calls with a trace function of this thread only (``sys.settrace``): no clock, no thread."""
    calls = 0

    def tracer(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += 1
        if calls > budget:
            raise _OverBudget()

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return fn()
    finally:
        sys.settrace(previous)


def _first_error(err: ValueError) -> str:
    if isinstance(err, ValidationError) and err.errors():
        return str(err.errors()[0]["msg"]).removeprefix("Value error, ")
    return str(err)
