"""AgentClient is one class over one connection with a sub-client per kind; its flat methods of
earlier releases are the sub-clients' own bound methods; one RPC-error translation serves every kind."""

from __future__ import annotations

import inspect

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client import AgentClient, Decisions, Graphs, Memories, Sessions, Tasks, Trajectories
from agentrt.client._addressed import WorkflowKind
from agentrt.client._session_calls import SESSION
from agentrt.client._tasks import TASK
from agentrt.schemas import RequestRejected, SessionNotFound, SessionStuck, TaskNotFound, WorkerUnavailable

# Each flat method of earlier releases and the sub-client call it is.
ALIASES = {
    "new_config": ("sessions", "new_config"), "start": ("sessions", "start"), "start_and_wait": ("sessions", "start_and_wait"),
    "send": ("sessions", "send"), "send_and_wait": ("sessions", "send_and_wait"), "wait": ("sessions", "wait"),
    "cancel": ("sessions", "cancel"), "archive": ("sessions", "archive"), "state": ("sessions", "state"),
    "switch_model": ("sessions", "switch_model"), "raise_budget": ("sessions", "raise_budget"),
    "compact": ("sessions", "compact"), "events": ("sessions", "events"), "all_events": ("sessions", "all_events"),
    "follow": ("sessions", "follow"), "deltas": ("sessions", "deltas"), "list_sessions": ("sessions", "list"),
    "approve": ("decisions", "approve"), "deny": ("decisions", "deny"), "reconcile": ("decisions", "reconcile"),
    "questions": ("decisions", "questions"), "answer": ("decisions", "answer"),
    "decide_memory": ("memories", "decide"), "forget_memory": ("memories", "forget"), "trajectory": ("trajectories", "get"),
    "start_task": ("tasks", "start"), "task_status": ("tasks", "status"), "task_events": ("tasks", "events"),
    "list_tasks": ("tasks", "list"), "wait_task": ("tasks", "wait"), "pause_task": ("tasks", "pause"),
    "resume_task": ("tasks", "resume"), "nudge_task": ("tasks", "nudge"), "cancel_task": ("tasks", "cancel"),
    "amend_task_goal": ("tasks", "amend_goal"), "raise_task_budget": ("tasks", "raise_budget"),
    "start_graph": ("graphs", "start"), "graph_status": ("graphs", "status"), "graph_events": ("graphs", "events"),
    "list_graphs": ("graphs", "list"), "wait_graph": ("graphs", "wait"), "approve_graph": ("graphs", "approve"),
    "reject_graph": ("graphs", "reject"), "cancel_graph": ("graphs", "cancel"),
}


def test_the_client_is_one_class_with_no_base_but_object() -> None:
    assert AgentClient.__bases__ == (object,)


def test_each_kind_has_its_sub_client_over_the_one_connection(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, principal="alice", operators=["ops"])
    kinds = {"sessions": Sessions, "decisions": Decisions, "memories": Memories, "trajectories": Trajectories,
             "tasks": Tasks, "graphs": Graphs}
    assert {name: type(getattr(client, name)) for name in kinds} == kinds
    assert all(getattr(client, name)._connection is client.connection for name in kinds)
    assert (client.temporal, client.principal, client.operators) == (temporal_client, "alice", ["ops"])


@pytest.mark.parametrize("flat", sorted(ALIASES))
def test_a_flat_method_is_its_sub_client_s_method(temporal_client: Client, flat: str) -> None:
    client = AgentClient(temporal_client, principal="alice")
    kind, verb = ALIASES[flat]
    assert getattr(client, flat) == getattr(getattr(client, kind), verb)
    assert inspect.signature(getattr(client, flat)) == inspect.signature(getattr(getattr(client, kind), verb))


def test_memories_is_the_sub_client_and_still_lists_when_called(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, principal="alice")
    assert inspect.signature(client.memories.__call__) == inspect.signature(client.memories.list)


def test_with_principal_is_a_new_client_on_the_same_connection_settings(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, principal="alice", default_profile="p", operators=["ops"])
    other = client.with_principal("bob")
    assert (other.principal, client.principal) == ("bob", "alice")
    assert (other.temporal, other.default_profile, other.operators) == (temporal_client, "p", ["ops"])
    assert other.sessions._connection is other.connection is not client.connection


def rpc(status: RPCStatusCode, message: str) -> RPCError:
    return RPCError(message, status, b"")


@pytest.mark.parametrize(("kind", "missing"), [(SESSION, SessionNotFound), (TASK, TaskNotFound)])
def test_one_translation_names_a_missing_workflow_or_worker_for_every_kind(kind: WorkflowKind, missing: type) -> None:
    assert isinstance(kind.error("x1", rpc(RPCStatusCode.NOT_FOUND, "gone")), missing)
    no_worker = kind.error("x1", rpc(RPCStatusCode.UNAVAILABLE, "no poller seen"))
    assert isinstance(no_worker, WorkerUnavailable) and str(no_worker).startswith(f"{kind.noun} x1: no worker")
    ended = kind.error("x1", rpc(RPCStatusCode.FAILED_PRECONDITION, "Workflow execution closed"))
    assert isinstance(ended, RequestRejected) and f"the {kind.noun}'s workflow has ended" in str(ended)


def test_a_session_whose_task_keeps_failing_is_stuck() -> None:
    error = SESSION.error("s1", rpc(RPCStatusCode.FAILED_PRECONDITION, "Workflow Task in failed state"))
    assert isinstance(error, SessionStuck) and error.session_id == "s1"
