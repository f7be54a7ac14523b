"""A session's run continues as new once its history reaches ``RUN_HISTORY_EVENTS``, long before
Temporal suggests it (4,096 events on this server, its default): a worker that takes sessions
over from a dead one must replay each history it is handed within the 4 s workflow task timeout,
and replaying ~3,700 events took longer than that on a loaded machine (bench.soak, 2026-12-07)."""

from __future__ import annotations

import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Replayer

from agentrt.client import AgentClient
from agentrt.schemas import SessionContinuedAsNew
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, build_worker
from bench.chaos import workflow_events
from tests.conftest import OWNER
from tests.e2e._support import session_config, write_script

RUN_HISTORY_EVENTS = 500  # workflows/_continuation.py
ROUNDS = 45  # read-only rounds in one turn: past RUN_HISTORY_EVENTS (about 12 history events each)


async def test_a_run_whose_history_reaches_the_bound_continues_as_new_at_the_turns_end(
    temporal_client: Client, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    config = AgentrtConfig(task_queue=f"bound-{uuid.uuid4().hex[:8]}", database_url=store_url)
    client = AgentClient(temporal_client, task_queue=config.task_queue, principal=OWNER, store=store)
    rounds = [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]} for _ in range(ROUNDS)]
    script = write_script(tmp_path, [*rounds, {"text": "listed"}, {"text": "second run"}])
    sid = uuid.uuid4().hex[:12]
    async with build_worker(temporal_client, config, store, task_queue=config.task_queue):
        started = await client.start(session_config(client, sid, workspace, script, local_tools=False), "list it 45 times")
        first_run = (await temporal_client.get_workflow_handle(f"session-{sid}").describe()).run_id
        assert (await client.wait(sid, started.turn_id, timeout_seconds=120)).status == "completed"
        second = await client.send(sid, "once more")
        outcome = await client.wait(sid, second.turn_id, timeout_seconds=60)

        assert outcome.status == "completed" and outcome.answer == "second run"
        view = await client.state(sid)
        assert view.run == 2 and view.turns_completed == 2
        continued = [e async for e in client.all_events(sid) if isinstance(e, SessionContinuedAsNew)]
        assert len(continued) == 1 and continued[0].reason == "history"
        assert RUN_HISTORY_EVENTS <= continued[0].history_events < 4_096
        # The chaos and fleet checks read every run's events with a client that has no store.
        storeless = AgentClient(temporal_client, task_queue=config.task_queue, principal=OWNER)
        events = await workflow_events(storeless, store, sid, rpc_timeout=30)
        assert [e.seq for e in events] == [e.seq for e in store.events(sid, 0, 100_000)] == list(range(1, len(events) + 1))
        # The first run, which continued as new at the bound, replays.
        history = await temporal_client.get_workflow_handle(f"session-{sid}", run_id=first_run).fetch_history()
        await Replayer(workflows=[], plugins=[AgentrtPlugin(config, store)]).replay_workflow(history)
