"""Names that cross process boundaries, defined once: activity names, workflow ids, search attributes.

Workflows schedule activities by these names and activities register under them, so a
rename is a change of wire format (running histories refer to the old name).
"""

from __future__ import annotations

from typing import Final

from temporalio.common import SearchAttributeKey

# Activity names (`@activity.defn(name=...)` and `workflow.execute_activity(name, ...)`).
PROVIDER_COMPLETE: Final = "provider.complete"
CONTEXT_COMPACT: Final = "context.compact"
PROFILES_DESCRIBE: Final = "profiles.describe"
TOOLS_LIST: Final = "tools.list"
SESSION_PREPARE: Final = "session.prepare"
TOOL_EXECUTE: Final = "tool.execute"
EFFECTS_RECONCILE: Final = "effects.reconcile"
STORE_APPEND: Final = "store.append"
ADVISOR_REVIEW: Final = "advisor.review"
MEMORY_DECIDE: Final = "memory.decide"
MCP_LIST_TOOLS: Final = "mcp.list_tools"
MCP_CALL_TOOL: Final = "mcp.call_tool"

# Workflow type names.
SESSION_WORKFLOW: Final = "SessionWorkflow"

# Search attributes every session upserts; the worker checks the namespace has them at start.
SESSION_STATUS: Final = SearchAttributeKey.for_keyword("AgentSessionStatus")
SESSION_OWNER: Final = SearchAttributeKey.for_keyword("AgentOwner")
SEARCH_ATTRIBUTE_KEYS: Final = (SESSION_STATUS, SESSION_OWNER)

SESSION_ID_PREFIX: Final = "session-"


def session_workflow_id(session_id: str) -> str:
    """The workflow id of a session: ``session-<session_id>``."""
    return f"{SESSION_ID_PREFIX}{session_id}"
