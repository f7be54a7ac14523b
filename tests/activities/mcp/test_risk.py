"""Risk classes of MCP tools from their annotations and overrides, and the tools not offered."""

from __future__ import annotations

from mcp.types import Tool, ToolAnnotations

from agentrt.activities.mcp import MAX_DESCRIPTION_CHARS, describe_tool, tool_risk
from agentrt.schemas import McpServerConfig

SERVER = McpServerConfig(name="srv", command="srv")


def tool(name: str = "do", annotations: ToolAnnotations | None = None, **fields: object) -> Tool:
    return Tool(name=name, input_schema={"type": "object", "properties": {}}, annotations=annotations, **fields)


def test_read_only_hint_makes_a_tool_read_only() -> None:
    assert tool_risk(ToolAnnotations(read_only_hint=True, destructive_hint=True), None) == ("read_only", "readOnlyHint: true", False)


def test_non_destructive_idempotent_hints_make_a_tool_idempotent() -> None:
    risk, reason, destructive = tool_risk(ToolAnnotations(destructive_hint=False, idempotent_hint=True), None)
    assert (risk, destructive) == ("idempotent", False)
    assert reason == "destructiveHint: false, idempotentHint: true"


def test_a_tool_without_annotations_is_effectful_and_not_marked_destructive() -> None:
    assert tool_risk(None, None) == ("effectful", "no annotations: effectful", False)


def test_annotations_without_destructive_hint_mean_destructive_by_mcp_default() -> None:
    risk, reason, destructive = tool_risk(ToolAnnotations(read_only_hint=False, open_world_hint=True), None)
    assert (risk, destructive) == ("effectful", True)
    assert reason == "readOnlyHint: false, openWorldHint: true, destructiveHint unset (true by default): effectful"


def test_a_non_destructive_tool_that_is_not_idempotent_is_effectful_but_not_destructive() -> None:
    risk, reason, destructive = tool_risk(ToolAnnotations(destructive_hint=False, idempotent_hint=False), None)
    assert (risk, destructive) == ("effectful", False)
    assert reason == "destructiveHint: false, idempotentHint: false: effectful"


def test_an_override_wins_over_annotations() -> None:
    assert tool_risk(ToolAnnotations(read_only_hint=True), "effectful") == ("effectful", "override in agentrt.toml: effectful", False)
    assert tool_risk(ToolAnnotations(destructive_hint=True), "read_only") == ("read_only", "override in agentrt.toml: read_only", False)
    assert tool_risk(ToolAnnotations(destructive_hint=True), "effectful")[2] is True


def test_a_tool_becomes_a_spec_named_server_dot_tool_with_its_source_and_trust() -> None:
    config = McpServerConfig(name="srv", command="srv", trust="untrusted", risk={"do": "idempotent"})
    info, spec = describe_tool(config, tool(description="Does it."))
    assert spec is not None
    assert (spec.name, spec.description, spec.risk, spec.source, spec.untrusted) == ("srv.do", "Does it.", "idempotent", "mcp:srv", True)
    assert spec.parameters == {"type": "object", "properties": {}}
    assert (info.qualified_name, info.skipped, info.risk_reason) == ("srv.do", None, "override in agentrt.toml: idempotent")


def test_a_name_that_is_too_long_once_qualified_is_skipped() -> None:
    info, spec = describe_tool(SERVER, tool("t" * 61))
    assert spec is None
    assert info.skipped is not None and "does not match" in info.skipped


def test_a_name_with_characters_providers_refuse_is_skipped() -> None:
    _, spec = describe_tool(SERVER, tool("has space"))
    assert spec is None


def test_a_schema_that_is_not_an_object_is_skipped() -> None:
    info, spec = describe_tool(SERVER, Tool(name="do", input_schema={"type": "array"}))
    assert spec is None
    assert info.skipped is not None and "not a JSON Schema object" in info.skipped


def test_a_schema_bigger_than_64_kib_is_skipped() -> None:
    big = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(700)}}
    info, spec = describe_tool(SERVER, Tool(name="do", input_schema=big))
    assert spec is None
    assert info.skipped is not None and "more than 65536" in info.skipped


def test_a_long_description_is_cut() -> None:
    info, spec = describe_tool(SERVER, tool(description="d" * 5000))
    assert spec is not None and len(spec.description) == MAX_DESCRIPTION_CHARS
    assert info.description == spec.description
