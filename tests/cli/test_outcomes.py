"""The CLI follows a turn to its end through a Temporal server restart, as the client does
(the rig and its restarts are tests/client/test_outcomes.py's)."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

from agentrt.cli._common import ApproveMode, drive_turn
from agentrt.cli._runtime import Runtime
from tests.client.test_outcomes import Rig, restartable, rig, through_a_restart, turn_started

__all__ = ["restartable", "rig"]  # the fixtures this module's test uses


async def test_the_cli_follows_a_turn_to_its_end_across_a_server_restart(rig: Rig, workspace: Path) -> None:
    sid = uuid.uuid4().hex[:12]
    out = io.StringIO()
    rt = Runtime(client=rig.waiter, config=rig.config, store=rig.env.store, embedded_server=None, ui_url=None)
    async with rig.worker():
        started = await rig.client().start(rig.session(sid, workspace, "followed", delay=2), "go")

        outcome = await through_a_restart(
            rig, sid, lambda: drive_turn(rt, sid, started.turn_id, ApproveMode.auto, out),
            once=turn_started(rig, sid, started.turn_id),
        )

    assert (outcome.status, outcome.answer) == ("completed", "followed")
    assert "followed" in out.getvalue()
