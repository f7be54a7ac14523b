"""A workspace under the gateway's root belongs to the principal that first started work in it:
another principal (its own token) cannot start a session, task or run in it, in a directory inside
it or in one that holds it, and is answered exactly as for a directory that does not exist. The
claim is kept in the store, outside the workspace, so it outlives the gateway."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.conftest import Harness
from tests.e2e._support import write_script
from tests.e2e.test_gateway import auth, create_session, gateway_with, http, own_workspace  # noqa: F401 (fixture)
from tests.gateway.test_gateway import assert_problem


async def start_as(http: httpx.AsyncClient, principal: str, workspace: str, script: str) -> httpx.Response:  # noqa: F811
    body = {"text": "hi", "workspace": workspace, "script": script}
    return await http.post("/v1/sessions", json=body, headers=auth(principal))


def missing_detail(detail: str, asked: str) -> str:
    """``detail`` with the directory asked for in place of ``nowhere``: what a missing one answers."""
    return detail.replace(repr("nowhere"), repr(asked))


async def test_another_principal_cannot_start_work_in_a_workspace_inside_it_or_above_it(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    await create_session(harness, http, script)  # alice starts work in ws: it is hers
    missing = assert_problem(await start_as(http, "mallory", "nowhere", script), 422)["detail"]

    for asked in ("ws", "ws/src", ".", str(workspace)):
        refused = assert_problem(await start_as(http, "mallory", asked, script), 422)
        assert refused["detail"] == missing_detail(missing, asked)
        assert "alice" not in refused["detail"]
    task = await http.post("/v1/tasks", json={"goal": "g", "workspace": "ws", "script": script}, headers=auth("mallory"))
    run = await http.post("/v1/runs", json={"goal": "g", "workspace": "ws", "script": script}, headers=auth("mallory"))
    assert assert_problem(task, 422)["detail"] == missing_detail(missing, "ws")
    assert assert_problem(run, 422)["detail"] == missing_detail(missing, "ws")

    mine = await start_as(http, "mallory", own_workspace(tmp_path, "mallory"), script)
    assert mine.status_code == 201, mine.text
    harness.session_ids.append(mine.json()["session_id"])
    again = await start_as(http, "alice", "ws/src", script)  # the owner works anywhere inside her workspace
    assert again.status_code == 201, again.text
    harness.session_ids.append(again.json()["session_id"])
    assert harness.store.workspace_owner(os.path.realpath(workspace)) == "alice"


async def test_the_owner_of_a_workspace_is_kept_in_the_store_across_gateways(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    async with gateway_with(harness, workspace) as first:
        await create_session(harness, first, script)

    async with gateway_with(harness, workspace) as second:  # a gateway started anew, on the same store
        assert_problem(await start_as(second, "mallory", "ws", script), 422)
        (workspace / "link").symlink_to(workspace / "src")
        assert_problem(await start_as(second, "mallory", "ws/link", script), 422)  # by its real path


async def test_a_script_in_another_principal_s_workspace_is_answered_as_a_missing_file(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    # A script is read by the session it starts, and its text (or a parse error quoting it) comes
    # back as the model's answer: alice's notes.json must not be mallory's model script.
    script = write_script(tmp_path, [{"text": "done"}])
    await create_session(harness, http, script)  # ws is alice's
    (workspace / "notes.json").write_text('{"turns": [{"text": "ALICE PRIVATE NOTE"}]}')
    mine = own_workspace(tmp_path, "mallory")
    nodes = {"nodes": [{"id": "a", "prompt": "x", "script": "ws/notes.json"}]}

    stolen = assert_problem(await start_as(http, "mallory", mine, "ws/notes.json"), 422)["detail"]
    missing = assert_problem(await start_as(http, "mallory", mine, "ws/no-such.json"), 422)["detail"]
    graph = await http.post("/v1/runs", json={"workspace": mine, "graph": nodes, "approve_plan": "auto"}, headers=auth("mallory"))

    assert stolen == missing.replace("no-such.json", "notes.json")
    assert "node 'a' script 'ws/notes.json' is not an existing file" in assert_problem(graph, 422)["detail"]
    ok = await start_as(http, "alice", "ws", "ws/notes.json")  # the owner's own script
    assert ok.status_code == 201, ok.text
    harness.session_ids.append(ok.json()["session_id"])
