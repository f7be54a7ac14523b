"""``OutputSpec`` and ``check_output``: specs from types and schemas, readable problems, and an
untrusted answer (or a hostile schema) that cannot make a check hang or raise."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from agentrt.schemas import (
    ConfigurationError,
    InvalidOutputSchema,
    OutputInvalid,
    OutputSpec,
    RunError,
    TurnOutcome,
    check_output,
    output_spec,
)
from agentrt.schemas._output import MAX_ANSWER_CHARS, MAX_DEPTH, MAX_VALUES


class Triage(BaseModel):
    priority: Literal["low", "high"]
    tags: list[str] = []


class Ticket(BaseModel):
    triage: Triage
    title: str


def test_a_spec_from_a_pydantic_model_is_named_by_it_and_keeps_its_definitions() -> None:
    spec = OutputSpec.from_type(Ticket)

    assert spec.name == "Ticket" and spec.json_schema["type"] == "object" and "Triage" in spec.json_schema["$defs"]
    assert check_output(spec, '{"triage": {"priority": "low"}, "title": "x"}').output == {"triage": {"priority": "low"}, "title": "x"}
    assert check_output(spec, '{"triage": {"priority": "mid"}, "title": "x"}').problems == [
        "triage/priority: 'mid' is not one of ['low', 'high']"
    ]


def test_a_spec_from_a_dataclass_works_like_one_from_a_model() -> None:
    @dataclass
    class Point:
        x: int
        y: int

    assert check_output(OutputSpec.from_type(Point), '{"x": 1, "y": 2}').output == {"x": 1, "y": 2}


def test_plain_text_output_types_give_no_spec() -> None:
    assert output_spec(None) is None and output_spec(str) is None
    assert output_spec({"type": "object"}) == OutputSpec(json_schema={"type": "object"})
    assert output_spec(Triage) == OutputSpec.from_type(Triage)


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "array"}, 'root must be "type": "object"'),
        ({"type": "object", "properties": {"a": {"type": 7}}}, "not a valid JSON Schema"),
        ({"type": "object", "description": "x" * 40_000}, "more than 32768"),
    ],
)
def test_a_schema_that_cannot_be_an_output_schema_is_a_configuration_error(schema: dict, problem: str) -> None:
    with pytest.raises(InvalidOutputSchema, match="invalid output schema") as caught:
        OutputSpec.from_schema(schema)

    assert isinstance(caught.value, ConfigurationError) and problem in caught.value.problem


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"properties": {"code": {"type": "string", "pattern": "^(?!X)[A-Z]+$"}}}, "the pattern '^(?!X)[A-Z]+$' is not RE2 syntax"),
        ({"$defs": {"Code": {"type": "string", "pattern": r"(a)\1"}}}, r"the pattern '(a)\\1' is not RE2 syntax"),
        ({"properties": {"tags": {"type": "array", "items": {"pattern": "(?<=#)x"}}}}, "is not RE2 syntax"),
        ({"patternProperties": {"^x-": {"type": "string"}}}, "patternProperties are not supported"),
    ],
)
def test_a_schema_no_answer_could_pass_is_refused_when_the_spec_is_built(schema: dict, problem: str) -> None:
    # The check of an answer runs patterns on RE2 and refuses patternProperties: every answer would fail.
    with pytest.raises(InvalidOutputSchema) as caught:
        OutputSpec.from_schema({"type": "object", **schema})

    assert problem in caught.value.problem


def test_a_property_called_pattern_is_a_name_and_an_re2_pattern_is_kept() -> None:
    spec = OutputSpec.from_schema({
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "patternProperties": {"enum": ["(?!x)"]}, "id": {"pattern": "^[a-z]+$"}},
    })

    assert check_output(spec, '{"pattern": "(?!x)", "patternProperties": "(?!x)", "id": "abc"}').output is not None


def test_a_type_pydantic_describes_as_no_object_is_refused_with_the_reason() -> None:
    with pytest.raises(InvalidOutputSchema, match="root must be"):
        OutputSpec.from_type(list[int])


def test_a_spec_with_a_bad_name_or_attempts_is_invalid_at_the_boundary() -> None:
    with pytest.raises(ValidationError, match="must be 1 to 64"):
        OutputSpec(name="has space", json_schema={"type": "object"})
    with pytest.raises(ValidationError):
        OutputSpec(json_schema={"type": "object"}, max_attempts=0)


def test_an_answer_in_a_json_fence_is_read_and_prose_is_a_problem() -> None:
    spec = OutputSpec.from_type(Triage)

    assert check_output(spec, '```json\n{"priority": "low"}\n```').output == {"priority": "low"}
    assert "not JSON" in check_output(spec, "The priority is low.").problems[0]
    assert check_output(spec, "[1, 2]").problems == ["(answer): a JSON list, not an object"]


def test_a_huge_answer_is_refused_before_it_is_parsed() -> None:
    answer = '{"priority": "' + "a" * MAX_ANSWER_CHARS + '"}'

    assert "characters, more than" in check_output(OutputSpec.from_type(Triage), answer).problems[0]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 200_000])
def test_a_deeply_nested_answer_is_a_problem_not_a_crash(depth: int) -> None:
    answer = '{"a": ' + "[" * depth + "]" * depth + "}"

    assert check_output(OutputSpec.from_schema({"type": "object"}), answer).problems == [f"(answer): nested deeper than {MAX_DEPTH}"]


def test_an_answer_with_too_many_values_is_a_problem() -> None:
    answer = json.dumps({"a": [0] * (MAX_VALUES + 1)})

    assert check_output(OutputSpec.from_schema({"type": "object"}), answer).problems == [f"(answer): more than {MAX_VALUES} values"]


def test_a_schema_whose_check_would_take_exponential_time_stops_at_its_budget() -> None:
    # Each level tries three alternatives that all fail at the bottom: 3^depth checks without a bound.
    node = {"anyOf": [
        {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1, "maxItems": 1},
        {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1, "maxItems": 2},
        {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 0, "minItems": 1},
    ]}
    spec = OutputSpec.from_schema({"type": "object", "$defs": {"n": node}, "properties": {"x": {"$ref": "#/$defs/n"}}})
    answer = '{"x": ' + "[" * 40 + "]" * 40 + "}"

    began = time.monotonic()
    problems = check_output(spec, answer).problems

    assert problems == ["(answer): the schema check took too long for this answer (simplify the answer)"]
    assert time.monotonic() - began < 60  # bounded by calls, not by a clock; this only says it ended


def test_a_pattern_that_would_backtrack_runs_in_linear_time_on_re2() -> None:
    spec = OutputSpec.from_schema({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}})

    problems = check_output(spec, json.dumps({"s": "a" * 5_000 + "!"})).problems

    assert len(problems) == 1 and "does not match" in problems[0]


def test_a_remote_reference_is_never_fetched_and_is_a_problem() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}}
    spec = OutputSpec.model_construct(json_schema=schema, name="output", strict=False, max_attempts=3)  # as an old history may hold

    problems = check_output(spec, '{"a": 1}').problems

    assert len(problems) == 1 and problems[0].startswith("(schema): the output schema cannot be applied")


DEEP: dict = {}
_level = DEEP
for _ in range(5000):
    _level["a"] = {}
    _level = _level["a"]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}},
         "$ref 'https://example.invalid/s.json' leaves the schema"),
        ({"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}}, "leaves the schema"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "points at nothing in the schema"),
        ({"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}, "$ref loops back"),
        ({"type": "object", "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
          "properties": {"x": {"$ref": "#/$defs/a"}}}, "$ref loops back"),
        ({"type": "object", "allOf": [{"$ref": "#"}]}, "$ref loops back"),
        ({"type": "object", "$dynamicRef": "#meta"}, "$dynamicRef is not supported"),
        ({"type": "object", "properties": {"a": {"$id": "https://example.invalid/", "$ref": "#/x"}}}, "$id is allowed at the schema's root only"),
        ({"type": "object", "properties": {"a": DEEP}}, f"nests deeper than {MAX_DEPTH} levels"),
    ],
)
def test_a_schema_no_answer_could_match_is_refused_where_it_is_given_not_at_every_answer(schema: dict, problem: str) -> None:
    with pytest.raises(InvalidOutputSchema) as caught:
        OutputSpec.from_schema(schema)

    assert problem in caught.value.problem


def test_data_in_a_schema_is_not_read_as_a_schema_and_property_names_are_names() -> None:
    # An enum value or a default that looks like a $ref, or a property called "$ref" or
    # "pattern", is data or a name: it never points anywhere and is never compiled.
    schema = {
        "type": "object",
        "properties": {
            "link": {"enum": [{"$ref": "#/nowhere"}], "default": {"$dynamicRef": "#x"}},
            "$ref": {"type": "string"},
            "pattern": {"type": "string", "examples": [{"pattern": "(?=look-around)"}]},
        },
    }

    spec = OutputSpec.from_schema(schema)

    assert check_output(spec, '{"link": {"$ref": "#/nowhere"}, "$ref": "x", "pattern": "y"}').output is not None


class Node(BaseModel):
    name: str
    children: list["Node"] = []


def test_a_model_that_refers_to_itself_is_an_output_type_and_its_answers_are_checked() -> None:
    spec = OutputSpec.from_type(Node)  # pydantic gives {"$defs": {"Node": ...}, "$ref": "#/$defs/Node"}

    assert spec.name == "Node" and spec.json_schema["type"] == "object" and "Node" in spec.json_schema["$defs"]
    answer = '{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}'
    assert check_output(spec, answer).output is not None
    assert check_output(spec, '{"name": "a", "children": [{"children": []}]}').problems == [
        "children/0: 'name' is a required property"
    ]
    outcome = TurnOutcome(turn_id="turn-1", status="completed", answer=answer, output=json.loads(answer))
    assert outcome.output_as(Node).children[0].children[0].name == "c"


def test_a_recursive_schema_that_moves_into_the_answer_is_a_spec_and_checks_answers() -> None:
    tree = {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name"]}
    spec = OutputSpec.from_schema(tree)

    assert check_output(spec, '{"name": "a", "children": [{"name": "b", "children": []}]}').output is not None
    assert check_output(spec, '{"name": "a", "children": [{}]}').problems == ["children/0: 'name' is a required property"]
    assert OutputSpec.from_type(Ticket).json_schema["properties"]["triage"] == {"$ref": "#/$defs/Triage"}


@pytest.mark.parametrize(("answer", "problem"), [
    ('{"priority": "low", "tags": [NaN]}', "holds NaN, which is not a JSON number"),
    ('{"priority": "low", "score": Infinity}', "holds Infinity, which is not a JSON number"),
    ('{"priority": "low", "score": -Infinity}', "holds -Infinity, which is not a JSON number"),
    ('{"priority": "low", "score": 1e999}', "holds 1e999, a number too large for a 64-bit float"),
])
def test_nan_and_infinite_numbers_in_an_answer_are_problems_not_an_output_history_would_turn_into_null(
    answer: str, problem: str
) -> None:
    spec = OutputSpec.from_schema({"type": "object", "properties": {"score": {"type": "number"}}})

    assert check_output(spec, answer).problems == [f"(answer): {problem}; JSON numbers are finite"]


def test_output_as_validates_the_object_and_raises_what_the_user_sees() -> None:
    done = TurnOutcome(turn_id="turn-1", status="completed", answer="{}", output={"priority": "high"})
    invalid = TurnOutcome(
        turn_id="turn-2", status="output_invalid", answer='{"priority": "mid"}', error="priority: 'mid' is not one of",
        error_type="OutputInvalid",
    )

    assert done.output_as(Triage) == Triage(priority="high")
    with pytest.raises(OutputInvalid, match="turn turn-2 has no valid structured output: priority: 'mid'") as caught:
        invalid.output_as(Triage)
    assert isinstance(caught.value, RunError) and caught.value.answer == '{"priority": "mid"}'
    with pytest.raises(ValueError, match="has no structured output"):
        TurnOutcome(turn_id="turn-3", status="completed", answer="hi").output_as(Triage)


def test_a_name_with_a_trailing_line_break_is_refused_not_sent_to_a_provider() -> None:
    with pytest.raises(InvalidOutputSchema, match="must be 1 to 64"):
        OutputSpec.from_schema({"type": "object"}, name="Triage\n")
    assert OutputSpec.from_schema({"type": "object", "title": "Triage\n"}).name == "output"
