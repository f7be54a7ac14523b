"""A workspace swapped for a symlink after its session started: the tools refuse it instead of following it.

Session B works in ``ws/sub``; session A works in ``ws`` and replaces ``sub`` with a symlink (its
sandbox lets it write there). B's later ``fs.write`` (which runs in the worker, outside any sandbox)
and ``shell.run`` must neither write nor run anything where the link leads. Run on the dev server
with the worker in this process, so the files the tools would reach are the test's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentrt.schemas import ApprovalPolicy, GraphSpec, ToolInvocationFailed
from tests.conftest import Harness
from tests.e2e._graphs import PASS, write_graph_script
from tests.e2e._support import session_config, write_script
from tests.e2e._tasks import write_file, write_task_script

# Every call runs without asking: only the tools themselves stand between B and the link's target.
AUTO = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow", destructive="allow", network="deny")


def _tool_texts(harness: Harness, session_id: str) -> list[str]:
    return [m.text for _, m in harness.store.messages(session_id) if m.role == "tool"]


@pytest.mark.parametrize("target", ["outside", "/"])
async def test_a_session_whose_workspace_was_swapped_for_a_symlink_writes_and_runs_nothing_where_it_leads(
    harness: Harness, tmp_path: Path, target: str
) -> None:
    ws = tmp_path / "root" / "ws"
    (ws / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    link_target = outside if target == "outside" else Path("/")
    # Where B's relative paths land once ws/sub leads to the link's target.
    into_outside = "." if target == "outside" else str(outside.relative_to("/"))
    b_script = write_script(tmp_path, [
        {"text": "ready"},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": f"{into_outside}/escape.md", "content": "out"}}]},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": f"echo hi > {into_outside}/shell-escape.txt; touch {outside}/abs"}}]},
        {"text": "b done"},
    ], name="b.json")
    a_script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": f"rm -rf sub && ln -s {link_target} sub"}}]},
        {"text": "a done"},
    ], name="a.json")
    b_id, a_id = harness.new_session_id(), harness.new_session_id()
    b_started = await harness.client.start(session_config(harness.client, b_id, ws / "sub", b_script, approval=AUTO), "wait")
    assert (await harness.client.wait(b_id, b_started.turn_id)).status == "completed"
    a_started = await harness.client.start(session_config(harness.client, a_id, ws, a_script, approval=AUTO), "swap")
    assert (await harness.client.wait(a_id, a_started.turn_id)).status == "completed"
    assert os.readlink(ws / "sub") == str(link_target)

    outcome = await harness.client.send_and_wait(b_id, "go")

    assert outcome.status == "completed"
    write, shell = _tool_texts(harness, b_id)
    for text in (write, shell):
        assert text.startswith(f"error: the workspace {str(ws / 'sub')!r} now resolves to {str(link_target)!r}")
    failed = [e for e in (await harness.client.events(b_id)).events if isinstance(e, ToolInvocationFailed)]
    assert [(e.tool, e.reason) for e in failed] == [("fs.write", "tool_error"), ("shell.run", "tool_error")]
    assert sorted(os.listdir(outside)) == []


async def test_a_workspace_given_through_a_symlink_is_stored_as_its_real_path_and_its_tools_work(
    harness: Harness, tmp_path: Path
) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    link = tmp_path / "link-ws"
    link.symlink_to(real)
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.write", "arguments": {"path": "note.md", "content": "noted"}},
            {"name": "shell.run", "arguments": {"command": "pwd -P > where.txt"}},
        ]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, link, script, approval=AUTO)

    started = await harness.client.start(config, "go")

    assert config.workspace == str(real)
    assert (await harness.client.wait(sid, started.turn_id)).status == "completed"
    assert (real / "note.md").read_text() == "noted"
    assert (real / "where.txt").read_text() == f"{real}\n"


async def test_a_task_started_in_a_symlinked_workspace_records_its_real_path_and_its_command_runs_there(
    harness: Harness, tmp_path: Path
) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    link = tmp_path / "link-ws"
    link.symlink_to(real)
    script = write_task_script(tmp_path, [[write_file("note.md", "noted"), {"text": "done"}]])

    task_id = await harness.client.start_task(
        "write the note", workspace=str(link), script=script, accept_command="test -f note.md", max_sessions=1, approval=AUTO
    )
    result = await harness.client.wait_task(task_id)

    assert (await harness.client.task_status(task_id)).workspace == str(real)
    assert result.status == "completed"
    assert (real / "note.md").read_text() == "noted"


async def test_a_graph_started_in_a_symlinked_workspace_records_its_real_path_and_its_nodes_work_there(
    harness: Harness, tmp_path: Path
) -> None:
    real = tmp_path / "real-ws"
    real.mkdir()
    link = tmp_path / "link-ws"
    link.symlink_to(real)
    write = {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.md", "content": "from a"}}]}
    script = write_graph_script(tmp_path, {"a": [{"turns": [write, {"text": "wrote a.md"}], "review": PASS}]})
    graph = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "write a.md", "tools": ["fs.write"]}]})

    graph_id = await harness.client.start_graph(graph=graph, workspace=str(link), script=script, approve_plan="auto")
    result = await harness.client.wait_graph(graph_id)

    assert (await harness.client.graph_status(graph_id)).workspace == str(real)
    assert result.status == "completed"
    assert (real / "a.md").read_text() == "from a"
