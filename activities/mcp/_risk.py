"""How an MCP tool reaches the model: its risk class from annotations or an override, and the
tools a client must not offer (names no provider takes, schemas that are no object or too big).

Annotations are hints (MCP 2025-06-18 and later, "Tool annotations"): ``readOnlyHint``
(default false), ``destructiveHint`` (default true; meaningful only when not read-only),
``idempotentHint`` (default false), ``openWorldHint`` (default true). The operator's override
in agentrt.toml wins over them; with neither, a tool is ``effectful``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
from mcp.types import Tool, ToolAnnotations

from agentrt.schemas import (
    MCP_TOOL_NAME_PATTERN,
    McpRisk,
    McpServerConfig,
    McpToolInfo,
    ToolSpec,
    untrusted_schema_problems,
)

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_SCHEMA_BYTES",
    "describe_tool",
    "tool_risk",
]

# A tool description the model reads is cut to this many characters.
MAX_DESCRIPTION_CHARS = 2000
# A tool whose input schema, as compact JSON, is bigger than this (bytes) is not offered.
MAX_SCHEMA_BYTES = 64 * 1024

_QUALIFIED_NAME = re.compile(MCP_TOOL_NAME_PATTERN)
# The hints read for the risk class, as MCP spells them, and their attribute on ToolAnnotations.
_HINTS = (
    ("readOnlyHint", "read_only_hint"),
    ("destructiveHint", "destructive_hint"),
    ("idempotentHint", "idempotent_hint"),
    ("openWorldHint", "open_world_hint"),
)


def tool_risk(annotations: ToolAnnotations | None, override: McpRisk | None) -> tuple[McpRisk, str, bool]:
    """``(risk, reason, destructive)`` of a tool with ``annotations`` (None: the server gave none)
    and the operator's ``override`` (``[mcp.servers.NAME].risk``), which wins.

    - ``readOnlyHint: true`` → ``read_only``;
    - ``destructiveHint: false`` and ``idempotentHint: true`` → ``idempotent``;
    - anything else → ``effectful``; ``destructive`` when annotations exist, ``readOnlyHint`` is
      not true and ``destructiveHint`` is not false (true is MCP's default).

    ``reason`` says which override or hints decided, in words an operator reads in
    ``agentrt mcp tools``.
    """
    read_only = annotations is not None and annotations.read_only_hint is True
    destructive = annotations is not None and not read_only and annotations.destructive_hint is not False
    if override is not None:
        return override, f"override in agentrt.toml: {override}", destructive and override == "effectful"
    if annotations is None:
        return "effectful", "no annotations: effectful", False
    if read_only:
        return "read_only", "readOnlyHint: true", False
    if annotations.destructive_hint is False and annotations.idempotent_hint is True:
        return "idempotent", "destructiveHint: false, idempotentHint: true", False
    given = [f"{wire}: {_json(getattr(annotations, attr))}" for wire, attr in _HINTS if getattr(annotations, attr) is not None]
    if annotations.destructive_hint is None:
        given.append("destructiveHint unset (true by default)")
    return "effectful", f"{', '.join(given)}: effectful", destructive


def describe_tool(config: McpServerConfig, tool: Tool) -> tuple[McpToolInfo, ToolSpec | None]:
    """What ``agentrt mcp tools`` shows of ``tool`` of the server ``config``, and the spec the model
    sees (None when the tool is skipped: ``McpToolInfo.skipped`` says why).

    Skipped: a name that, as ``<server>.<tool>``, does not match ``MCP_TOOL_NAME_PATTERN``; an
    input schema that is not a JSON Schema object (``"type": "object"``) or is bigger than
    ``MAX_SCHEMA_BYTES`` as JSON. The description is cut to ``MAX_DESCRIPTION_CHARS``.
    """
    qualified = f"{config.name}.{tool.name}"
    risk, reason, destructive = tool_risk(tool.annotations, config.risk.get(tool.name))
    description = tool.description or tool.title or (tool.annotations.title if tool.annotations else None) or ""
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json") if tool.annotations else {}
    skipped = _skip_reason(qualified, tool.input_schema)
    info = McpToolInfo(
        name=tool.name, qualified_name=qualified, description=description, risk=risk, risk_reason=reason,
        annotations=annotations, skipped=skipped,
        input_schema=tool.input_schema if isinstance(tool.input_schema, dict) else {},
    )
    if skipped is not None:
        return info, None
    spec = ToolSpec(
        name=qualified, description=description, parameters=tool.input_schema, risk=risk, risk_reason=reason,
        source=f"mcp:{config.name}", untrusted=config.trust == "untrusted", destructive=destructive,
    )
    return info, spec


def _skip_reason(qualified: str, schema: Any) -> str | None:
    if not _QUALIFIED_NAME.match(qualified):
        shown = qualified if len(qualified) <= 100 else qualified[:100] + "…"
        return f"the name {shown!r} does not match {MCP_TOOL_NAME_PATTERN} (what providers accept)"
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not a JSON Schema object (\"type\": \"object\")"
    size = len(json.dumps(schema, separators=(",", ":")).encode())
    if size > MAX_SCHEMA_BYTES:
        return f"its input schema is {size} bytes of JSON, more than {MAX_SCHEMA_BYTES}"
    return schema_problem(schema)


def schema_problem(schema: Any) -> str | None:
    """Why a server's JSON Schema cannot be offered to a model, or None: it is not valid draft
    2020-12 (``check_schema``), refers outside itself (a ``$ref`` not starting with ``#``: never
    fetched or read), holds ``patternProperties``, or a ``pattern`` RE2 cannot run. The workflow
    applies such schemas with the same rules (``agentrt.schemas.argument_problems``)."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except Exception as err:  # noqa: BLE001 - SchemaError, or what a hostile schema makes the meta-check raise
        what = err.message if isinstance(err, jsonschema.SchemaError) else type(err).__name__
        return f"its input schema is not valid JSON Schema (draft 2020-12): {str(what)[:200]}"
    for key, value in _walk(schema):
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and not value.startswith("#"):
            return f"its input schema refers outside itself ({key} {value[:200]!r})"
        if key == "patternProperties":
            return "its input schema holds patternProperties"
        if key == "pattern" and isinstance(value, str) and not _re2_ok(value):
            return f"its input schema's pattern {value[:200]!r} is not RE2 syntax"
    return None


def _re2_ok(pattern: str) -> bool:
    return not any("not supported" in p for p in untrusted_schema_problems({"pattern": pattern}, ""))


def _walk(value: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of every object in ``value``; bounded depth (check_schema passed)."""
    if depth > 200:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, depth + 1)


def _json(value: Any) -> str:
    return json.dumps(value)
