"""The tool registry: lookup, specs, argument validation and dispatch of model tool calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.activities.tools import Tool, ToolArgs, ToolContext, ToolOutput, ToolRegistry
from agentrt.schemas import ConfigurationError, ToolArgumentsError, ToolCall, ToolError


class Echo(Tool):
    name = "test.echo"
    description = "Echo the text back."
    risk = "read_only"

    class Args(ToolArgs):
        text: str
        times: int = 1

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(text=args.text * args.times)


def test_default_registry_has_the_builtin_tools(registry) -> None:
    assert registry.names() == [
        "fs.list", "fs.read", "fs.search", "fs.write", "shell.run", "memory.recall", "memory.write", "skill.activate", "skill.deactivate",
        "delegate",
    ]


def test_execute_validates_and_runs_the_tool(ctx: ToolContext) -> None:
    reg = ToolRegistry([Echo()])
    out = reg.execute(ToolCall(id="1", name="test.echo", arguments={"text": "ab", "times": 2}), ctx)
    assert out.text == "abab"


def test_unknown_tool_is_a_tool_error_listing_the_available_ones(registry, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"unknown tool 'fs.delete'; available: fs.list, fs.read"):
        registry.execute(ToolCall(id="1", name="fs.delete", arguments={}), ctx)


def test_malformed_json_arguments_are_an_argument_error_with_the_parse_problem(registry, ctx: ToolContext) -> None:
    call = ToolCall(id="1", name="fs.read", arguments=None, arguments_raw='{"path": ', arguments_error="Expecting value: line 1 column 10")
    with pytest.raises(ToolArgumentsError, match="Expecting value: line 1 column 10") as info:
        registry.execute(call, ctx)
    assert info.value.tool == "fs.read"


def test_missing_required_argument_is_reported_as_field_required(registry) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        registry.validate("fs.read", {})
    assert info.value.problems == ["path: field required"]


def test_extra_argument_is_reported_as_not_allowed(registry) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        registry.validate("fs.read", {"path": "a", "foo": 1})
    assert info.value.problems == ["extra field 'foo' not allowed"]


def test_wrongly_typed_argument_names_the_field(registry) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        registry.validate("fs.list", {"max_entries": "many"})
    assert info.value.problems[0].startswith("max_entries: ")


def test_validate_returns_the_args_model_with_defaults(registry) -> None:
    args = registry.validate("fs.list", None)
    assert (args.path, args.recursive, args.max_entries) == (".", False, 500)


def test_specs_of_named_tools_reports_the_unknown_names(registry) -> None:
    specs, unknown = registry.specs(["fs.read", "web.fetch", "shell.run"])
    assert ([s.name for s in specs], unknown) == (["fs.read", "shell.run"], ["web.fetch"])


def test_spec_parameters_are_the_args_json_schema() -> None:
    spec = Echo().spec()
    assert spec.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
        "required": ["text"],
    }
    assert spec.risk == "read_only"


def test_registering_a_name_twice_is_a_configuration_error() -> None:
    reg = ToolRegistry([Echo()])
    with pytest.raises(ConfigurationError, match="already registered"):
        reg.register(Echo())


def test_tool_errors_from_the_tool_propagate_unchanged(registry, workspace: Path) -> None:
    with pytest.raises(ToolError, match="no such file"):
        registry.execute(ToolCall(id="1", name="fs.read", arguments={"path": "missing"}), ToolContext(workspace=workspace))
