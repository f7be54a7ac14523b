"""A session that names a file which would stall a reader (a FIFO nobody writes to) or lead out of
where it may read (a symlink to ``/etc/passwd``) as its scripted model's script: its turn fails
with the reason, and the worker goes on serving another session meanwhile (the file is opened on
a thread, never waited on)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.conftest import Harness
from tests.e2e._support import session_config, write_script


@pytest.mark.parametrize("kind", ["fifo", "symlink-to-passwd"])
async def test_a_session_naming_a_stalling_or_outside_file_fails_alone_while_another_is_served(
    harness: Harness, workspace: Path, tmp_path: Path, kind: str
) -> None:
    hostile = tmp_path / "hostile.json"
    if kind == "fifo":
        os.mkfifo(hostile)  # no writer, ever: an open for reading would wait forever
    else:
        hostile.symlink_to("/etc/passwd")
    stuck_id, other_id = harness.new_session_id(), harness.new_session_id()
    config = session_config(harness.client, stuck_id, workspace, str(tmp_path))
    # The path as given, not made real as new_config makes it: a client that sends it so, or a link swapped in after.
    stuck = await harness.client.start(config.model_copy(update={"script": str(hostile)}), "go")

    other = await harness.client.start(
        session_config(harness.client, other_id, workspace, write_script(tmp_path, [{"text": "served"}])), "go"
    )
    served = await asyncio.wait_for(harness.client.wait(other_id, other.turn_id), 60)
    failed = await asyncio.wait_for(harness.client.wait(stuck_id, stuck.turn_id), 60)

    assert (served.status, served.answer) == ("completed", "served")
    assert failed.status == "failed"
    assert ("fifo" if kind == "fifo" else "symbolic link") in (failed.error or "")
    assert "root:" not in (failed.error or "")


async def test_a_hostile_model_reads_nothing_through_links_fifos_or_devices_in_its_workspace(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "passwd").symlink_to("/etc/passwd")
    (workspace / "zero").symlink_to("/dev/zero")
    (workspace / "up").symlink_to("/etc")
    os.mkfifo(workspace / "fifo")
    reads = [{"name": "fs.read", "arguments": {"path": p}} for p in ("passwd", "zero", "up/passwd", "fifo", "/etc/passwd")]
    script = write_script(tmp_path, [
        {"tool_calls": reads + [{"name": "fs.search", "arguments": {"pattern": "root", "path": "."}}]},
        {"text": "done"},
    ], "hostile.json")
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "read everything")

    outcome = await asyncio.wait_for(harness.client.wait(sid, started.turn_id), 60)

    assert (outcome.status, outcome.answer) == ("completed", "done")
    results = [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert len(results) == 6
    assert not any("root:x:0:0" in text for text in results)
    assert results[-1] == "no matches"
