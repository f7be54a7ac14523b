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
TASK_RECORD: Final = "task.record"
TASK_CHECK_COMMAND: Final = "task.check_command"
TASK_EVALUATE_TRIGGER: Final = "task.evaluate_trigger"
TASK_REVIEW: Final = "task.review"
TASK_NEXT_WAKE: Final = "task.next_wake"

# Workflow type names.
SESSION_WORKFLOW: Final = "SessionWorkflow"
AUTONOMOUS_TASK_WORKFLOW: Final = "AutonomousTaskWorkflow"

# Search attributes every session upserts; the worker checks the namespace has them at start.
SESSION_STATUS: Final = SearchAttributeKey.for_keyword("AgentSessionStatus")
SESSION_OWNER: Final = SearchAttributeKey.for_keyword("AgentOwner")
SEARCH_ATTRIBUTE_KEYS: Final = (SESSION_STATUS, SESSION_OWNER)

SESSION_ID_PREFIX: Final = "session-"
TASK_ID_PREFIX: Final = "task-"


def session_workflow_id(session_id: str) -> str:
    """The workflow id of a session: ``session-<session_id>``."""
    return f"{SESSION_ID_PREFIX}{session_id}"


def task_workflow_id(task_id: str) -> str:
    """The workflow id of an autonomous task: ``task-<task_id>``."""
    return f"{TASK_ID_PREFIX}{task_id}"


def task_session_id(task_id: str, number: int, token: str) -> str:
    """The session id of an autonomous task's session ``number`` (1, 2, ...): ``<task_id>-s<number>-<token>``.

    ``token`` comes from the task's deterministic randomness (``workflow.uuid4()``), so nobody
    can start a session under the id a task will give its next one."""
    return f"{task_id}-s{number}-{token}"
