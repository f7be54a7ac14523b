"""MCP servers as tool sources on the worker: their connections (``McpManager``), how their
tools reach the model (risk classes from annotations) and how their results read as text."""

from agentrt.activities.mcp._connections import BACKOFF_MAX_SECONDS
from agentrt.activities.mcp._launch import SERVER_PATH
from agentrt.activities.mcp._listing import MAX_LIST_PAGES, MAX_LISTED_TOOLS, McpListing
from agentrt.activities.mcp._manager import McpCallOutcome, McpManager
from agentrt.activities.mcp._results import (
    MAX_EMBEDDED_TEXT_BYTES,
    MAX_RESULT_BYTES,
    MAX_SAVED_FILE_BYTES,
    result_text,
)
from agentrt.activities.mcp._risk import MAX_DESCRIPTION_CHARS, MAX_SCHEMA_BYTES, describe_tool, tool_risk

__all__ = [
    "BACKOFF_MAX_SECONDS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_EMBEDDED_TEXT_BYTES",
    "MAX_LISTED_TOOLS",
    "MAX_LIST_PAGES",
    "MAX_RESULT_BYTES",
    "MAX_SAVED_FILE_BYTES",
    "MAX_SCHEMA_BYTES",
    "McpCallOutcome",
    "McpListing",
    "McpManager",
    "SERVER_PATH",
    "describe_tool",
    "result_text",
    "tool_risk",
]
