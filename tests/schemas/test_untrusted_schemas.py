"""A schema from an MCP server is applied without fetching, reading or backtracking, and never raises."""

from __future__ import annotations

import pytest

from agentrt.schemas import ToolSpec, argument_problems, untrusted_schema_problems


def _mcp(schema: dict) -> ToolSpec:
    return ToolSpec(name="srv.tool", description="", parameters=schema, source="mcp:srv")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
        {"type": "object", "properties": {"a": {"minLength": "x"}}},
        {"$ref": "#/$defs/nowhere"},
        {"$ref": "http://127.0.0.1:9/secret.json"},
        {"$ref": "file:///etc/passwd#/x"},
    ],
)
def test_a_schema_that_cannot_be_applied_is_one_problem_not_an_exception(schema: dict) -> None:
    [problem] = argument_problems(_mcp(schema), {"a": "x"})
    assert problem.startswith("(schema): the tool's input schema cannot be applied (")
    assert "root:" not in problem  # no referenced document quoted back


def test_patterns_run_on_re2_so_a_catastrophic_one_answers_at_once() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}
    assert argument_problems(_mcp(schema), {"a": "a" * 64 + "!"}) == ["a: '" + "a" * 64 + "!' does not match '^(a+)+$'"]
    assert argument_problems(_mcp(schema), {"a": "aaaa"}) == []
    lookahead = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}
    assert "not supported (RE2 syntax only)" in argument_problems(_mcp(lookahead), {"a": "x"})[0]


def test_pattern_properties_are_refused_and_formats_are_checked() -> None:
    assert "patternProperties are not supported" in untrusted_schema_problems({"patternProperties": {"^(a+)+$": {}}}, {"aa": 1})[0]
    schema = {"type": "object", "properties": {"e": {"format": "email"}, "d": {"format": "date"}, "r": {"format": "regex"}}}
    assert untrusted_schema_problems(schema, {"e": "nope", "d": "2026-13-45", "r": "(a+)+$"}) == [
        "d: '2026-13-45' is not a 'date'", "e: 'nope' is not a 'email'",
    ]


def test_a_built_in_tool_s_schema_is_applied_as_before() -> None:
    builtin = ToolSpec(name="fs.read", description="", parameters={"type": "object", "required": ["path"]})
    assert argument_problems(builtin, {}) == ["(arguments): 'path' is a required property"]
