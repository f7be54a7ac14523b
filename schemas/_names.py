"""Names that cross process boundaries, defined once: activity names, workflow ids, search attributes.

Workflows schedule activities by these names and activities register under them, so a
rename is a change of wire format (running histories refer to the old name).
"""

from __future__ import annotations

from typing import Final

from temporalio.common import SearchAttributeKey

__all__ = [
    "ADVISOR_REVIEW",
    "AGENT_KIND",
    "AGENT_PROFILE",
    "AUTONOMOUS_TASK_WORKFLOW",
    "CHILD_SPEND_SIGNAL",
    "CONTEXT_COMPACT",
    "EFFECTS_RECONCILE",
    "GRAPH_ID_PREFIX",
    "GRAPH_PLAN",
    "GRAPH_RECORD",
    "GRAPH_REVIEW",
    "MCP_CALL_TOOL",
    "MCP_LIST_TOOLS",
    "MEMORY_DECIDE",
    "MODEL_CALL_RETRIED_SIGNAL",
    "PENDING_APPROVALS",
    "PROFILES_DESCRIBE",
    "PROVIDER_COMPLETE",
    "QUERY_RAN_AHEAD",
    "SEARCH_ATTRIBUTE_KEYS",
    "SESSION_ID_PREFIX",
    "SESSION_OWNER",
    "SESSION_PREPARE",
    "SESSION_STATUS",
    "SESSION_WORKFLOW",
    "SPEND_USD",
    "STORE_APPEND",
    "TASK_CHECK_COMMAND",
    "TASK_EVALUATE_TRIGGER",
    "TASK_GRAPH_WORKFLOW",
    "TASK_ID_PREFIX",
    "TASK_NEXT_WAKE",
    "TASK_RECORD",
    "TASK_REVIEW",
    "TASK_WORKSPACE_COMMIT",
    "TOOLS_LIST",
    "TOOL_EXECUTE",
    "UPGRADE_SIGNAL",
    "delegated_session_id",
    "graph_node_session_id",
    "graph_workflow_id",
    "session_workflow_id",
    "task_session_id",
    "task_workflow_id",
]

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
TASK_WORKSPACE_COMMIT: Final = "task.workspace_commit"
GRAPH_PLAN: Final = "graph.plan"
GRAPH_REVIEW: Final = "graph.review"
GRAPH_RECORD: Final = "graph.record"

# Workflow type names.
SESSION_WORKFLOW: Final = "SessionWorkflow"
AUTONOMOUS_TASK_WORKFLOW: Final = "AutonomousTaskWorkflow"
TASK_GRAPH_WORKFLOW: Final = "TaskGraphWorkflow"

# Signal every workflow that starts child sessions (session, task, graph) takes: a child session
# that ends cancelled reports its spend (``ChildSpendReport``) to its parent first.
CHILD_SPEND_SIGNAL: Final = "child_spend"
# The signal a model activity sends its session when an attempt failed and will be retried.
MODEL_CALL_RETRIED_SIGNAL: Final = "model_call_retried"
# Signal a pinned session or task takes from the workers of a newer current build of its Worker
# Deployment: it wakes an idle run, which continues as new onto that build (no input).
UPGRADE_SIGNAL: Final = "upgrade"

# Search attributes sessions, tasks and graphs upsert (the Temporal UI's filters and saved views);
# the worker checks the namespace has them at start, the dev server registers them.
# ``AgentSessionStatus``: the status of the session, task or graph (each kind's own words).
SESSION_STATUS: Final = SearchAttributeKey.for_keyword("AgentSessionStatus")
# ``AgentOwner``: the principal that owns it.
SESSION_OWNER: Final = SearchAttributeKey.for_keyword("AgentOwner")
# ``AgentKind``: ``session``, ``task`` or ``graph`` (``console-v1``).
AGENT_KIND: Final = SearchAttributeKey.for_keyword("AgentKind")
# ``AgentProfile``: the model profile it runs on (a session's current one; a task's or graph's configured one).
AGENT_PROFILE: Final = SearchAttributeKey.for_keyword("AgentProfile")
# ``AgentPendingApprovals``: decisions a human owes it now (tool-call approvals, reconcile
# answers, MCP questions; a graph's plan approval).
PENDING_APPROVALS: Final = SearchAttributeKey.for_int("AgentPendingApprovals")
# ``AgentSpendUsd``: US dollars spent so far by the profiles' prices; set once there is a cost.
SPEND_USD: Final = SearchAttributeKey.for_float("AgentSpendUsd")
SEARCH_ATTRIBUTE_KEYS: Final = (SESSION_STATUS, SESSION_OWNER, AGENT_KIND, AGENT_PROFILE, PENDING_APPROVALS, SPEND_USD)

SESSION_ID_PREFIX: Final = "session-"
TASK_ID_PREFIX: Final = "task-"
GRAPH_ID_PREFIX: Final = "graph-"


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


def graph_workflow_id(graph_id: str) -> str:
    """The workflow id of a task graph: ``graph-<graph_id>``."""
    return f"{GRAPH_ID_PREFIX}{graph_id}"


def graph_node_session_id(graph_id: str, node_id: str, attempt: int, token: str) -> str:
    """The session id of attempt ``attempt`` (1, 2, ...) of node ``node_id``: ``<graph_id>-<node_id>-a<attempt>-<token>``
    (``token`` from the graph's deterministic randomness, as ``task_session_id``'s)."""
    return f"{graph_id}-{node_id}-a{attempt}-{token}"


def delegated_session_id(session_id: str, number: int, token: str) -> str:
    """The session id of the ``number``-th session (1, 2, ...) that session ``session_id`` delegated to:
    ``<session_id>-d<number>-<token>``."""
    return f"{session_id}-d{number}-{token}"

# Starts the failure of a query that a worker refused because it came ahead of a workflow task
# (worker/_query_guard.py); the query succeeds when asked again once that task ran.
QUERY_RAN_AHEAD: Final = "[agentrt:query-ran-ahead]"
