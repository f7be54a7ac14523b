"""A rolling deploy under load, tried for real: build A serves sessions, a task and a graph; build B
is started and made current; build A is stopped once Temporal says it is drained.

    python -m bench.rolling_deploy [--idle 20] [--waiting 15] [--busy 15] [--workdir DIR]

Starts its own Temporal dev server (the drainage status refreshed every 5 s instead of 3 min), a
SQLite store and two `agentrt worker` processes of one deployment, `A` then `B` (the same code;
only the build id differs: what is measured is the deploy, not a code change). On build A:

- ``--idle`` sessions that answered their first turn and wait for the next;
- ``--waiting`` sessions whose turn waits for an approval of ``shell.run`` (an append to a file);
- ``--busy`` sessions in the middle of a turn (a model reply that takes 45 s);
- an autonomous task asleep on an hour's timer after its first session;
- a graph of two nodes running one after the other (each node's model reply takes 20 s).

Then build B starts, `temporal worker deployment set-current-version` makes it current, the
waiting sessions are approved (after the switch), every session is sent one more turn, the task is
nudged to run its next session, and the graph finishes. Build A is stopped (SIGTERM) once
`temporal worker deployment describe-version` says ``drained``. Printed: the timeline, sessions per
build before and after, failed turns, duplicated effects (an appended line seen twice), approvals
that landed after the switch, and where the task's and graph's runs ended. The last line is

    rolling_deploy sessions=<n> on_b_after=<n> failed_turns=<n> duplicated_effects=<n> approvals_after_switch=<n> drained_after=<s>
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from agentrt.client import AgentClient, connect
from agentrt.schemas import (
    AUTONOMOUS_TASK_WORKFLOW,
    SESSION_OWNER,
    SESSION_STATUS,
    TASK_GRAPH_WORKFLOW,
    AutonomousTaskInput,
    GraphConfig,
    GraphSpec,
    PermissionRequested,
    SessionConfig,
    TaskConfig,
    TaskGraphInput,
    graph_workflow_id,
    session_workflow_id,
    task_workflow_id,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer

OWNER = "deployer"
BUSY_SECONDS = 45.0  # a mid-turn session's model reply: it spans build B's start and switch
GRAPH_NODE_SECONDS = 20.0  # each of the graph's two nodes
DEPLOYMENT = "agentrt"
DRAINAGE = ["matching.wv.VersionDrainageStatusRefreshInterval=\"5s\"", "matching.wv.VersionDrainageStatusVisibilityGracePeriod=\"5s\""]


def _temporal_cli(server: DevServer, *args: str) -> str:
    binary = shutil.which("temporal", path=str(Path(sys.executable).parent)) or "temporal"
    result = subprocess.run([binary, *args, "--address", server.address], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"temporal {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


class Deploy:
    def __init__(self, root: Path, server: DevServer, temporal: Client, store: Store, queue: str, database_url: str) -> None:
        self.root, self.server, self.temporal, self.store, self.queue = root, server, temporal, store, queue
        self.database_url = database_url
        self.client = AgentClient(temporal, task_queue=queue, principal=OWNER, store=store)
        self.t0 = time.monotonic()
        self.timeline: list[tuple[float, str]] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    def mark(self, what: str) -> None:
        at = time.monotonic() - self.t0
        self.timeline.append((at, what))
        print(f"  {at:7.1f} s  {what}", flush=True)

    def start_worker(self, build: str) -> None:
        env = {
            **os.environ, "AGENTRT_TEMPORAL_ADDRESS": self.server.address, "AGENTRT_TASK_QUEUE": self.queue,
            "AGENTRT_DATABASE_URL": self.database_url, "AGENTRT_DEPLOYMENT": DEPLOYMENT, "AGENTRT_BUILD_ID": build,
            # In clear, as the bench's client: the machine's own keys (made by `agentrt dev` or `make demo`) stay out.
            "AGENTRT_ENCRYPTION": "off",
        }
        log = (self.root / f"worker-{build}.log").open("ab")
        self.workers[build] = subprocess.Popen(
            [sys.executable, "-m", "agentrt.cli", "worker", "--graceful-shutdown", "30"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True,
        )

    async def make_current(self, build: str) -> None:
        for _ in range(300):
            try:
                await asyncio.to_thread(_temporal_cli, self.server, "worker", "deployment", "set-current-version", "--deployment-name", DEPLOYMENT, "--build-id", build, "--yes")
                return
            except RuntimeError:
                await asyncio.sleep(0.2)  # its workers have not polled yet
        raise RuntimeError(f"build {build} never registered")

    def drainage(self, build: str) -> str:
        """Build ``build``'s drainage status ('' while it is current); asked again while the server
        says the deployment has too many requests."""
        for _ in range(30):
            try:
                return self._drainage(build)
            except RuntimeError as err:
                if "too many requests" not in str(err):
                    raise
                time.sleep(2)
        return self._drainage(build)

    def _drainage(self, build: str) -> str:
        described = json.loads(_temporal_cli(self.server, "worker", "deployment", "describe-version", "--deployment-name", DEPLOYMENT, "--build-id", build, "-o", "json"))
        return str((described.get("drainageInfo") or {}).get("drainageStatus", ""))

    async def pinned(self, workflow_id: str) -> str:
        info = (await self.temporal.get_workflow_handle(workflow_id).describe()).raw_description.workflow_execution_info
        return info.versioning_info.deployment_version.build_id or "-"

    def script(self, name: str, body: dict[str, Any]) -> str:
        path = self.root / "scripts" / f"{name}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(body))
        return str(path)

    def workspace(self, name: str) -> Path:
        path = self.root / "ws" / name
        path.mkdir(parents=True)
        return path

    def session(self, name: str, turns: list[dict[str, Any]]) -> SessionConfig:
        return self.client.new_config(
            str(self.workspace(name)), session_id=f"{name}-{uuid.uuid4().hex[:6]}", script=self.script(name, {"turns": turns}),
            profile="scripted",
        )


async def _run(root: Path, idle: int, waiting: int, busy: int) -> int:
    server = DevServer.on_free_ports(root / "server", [a for pair in (("--dynamic-config-value", d) for d in DRAINAGE) for a in pair])
    await server.start()
    database_url = f"sqlite:///{root / 'agentrt.db'}"
    store = Store.open(database_url)
    config = AgentrtConfig(temporal_address=server.address, task_queue=f"deploy-{uuid.uuid4().hex[:6]}", database_url=database_url)
    temporal = await connect(server.address, plugin=AgentrtPlugin(config, store))
    d = Deploy(root, server, temporal, store, config.task_queue, database_url)
    try:
        return await _deploy(d, idle, waiting, busy)
    finally:
        for process in d.workers.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        store.close()
        server.stop()


async def _watch_drainage(d: Deploy) -> None:
    """Mark each change of build A's drainage status until it says drained."""
    seen = ""
    while seen != "drained":
        status = await asyncio.to_thread(d.drainage, "A")
        if status != seen:
            d.mark(f"`temporal worker deployment describe-version` says build A is {status or 'current'}")
            seen = status
        await asyncio.sleep(2)


def _append(line: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell.run", "arguments": {"command": f"echo {line} >> effects.log"}}]}


async def _deploy(d: Deploy, idle: int, waiting: int, busy: int) -> int:
    print("timeline:")
    d.start_worker("A")
    await d.make_current("A")
    d.mark("build A current")
    sessions: dict[str, list[SessionConfig]] = {"idle": [], "waiting": [], "busy": []}
    for n in range(idle):
        sessions["idle"].append(d.session(f"idle{n}", [{"text": "first"}, {"text": "next"}]))
    for n in range(waiting):
        sessions["waiting"].append(d.session(f"wait{n}", [_append(f"w{n}"), {"text": "appended"}, {"text": "next"}]))
    for n in range(busy):
        sessions["busy"].append(d.session(f"busy{n}", [{"text": "slow", "delay_seconds": BUSY_SECONDS}, {"text": "next"}]))
    first_turns: dict[str, str] = {}
    await asyncio.gather(*(d.client.start_and_wait(c, "hello") for c in sessions["idle"]))
    for c in sessions["waiting"]:
        first_turns[c.session_id] = (await d.client.start(c, "go")).turn_id
    asks: dict[str, str] = {}
    for c in sessions["waiting"]:
        while c.session_id not in asks:
            requested = [e for e in (await d.client.events(c.session_id)).events if isinstance(e, PermissionRequested)]
            if requested:
                asks[c.session_id] = requested[0].request.request_id
            else:
                await asyncio.sleep(0.1)
    task_ws = d.workspace("task")
    task = TaskConfig(
        owner=OWNER, goal="two parts", workspace=str(task_ws), profile="scripted", task_id=f"t{uuid.uuid4().hex[:8]}",
        script=d.script("task", {"sessions": [
            {"turns": [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "one.txt", "content": "1"}}]}, {"text": "one"}]},
            {"turns": [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "two.txt", "content": "2"}}]}, {"text": "two"}]},
        ]}),
        acceptance={"command": "test -f two.txt"}, schedule={"every_seconds": 3600.0},
        approval={"read_only": "allow", "idempotent": "allow", "effectful": "allow"},
    )
    await d.temporal.start_workflow(
        AUTONOMOUS_TASK_WORKFLOW, AutonomousTaskInput(config=task), id=task_workflow_id(task.task_id), task_queue=d.queue,
        search_attributes=TypedSearchAttributes([SearchAttributePair(SESSION_OWNER, OWNER), SearchAttributePair(SESSION_STATUS, "waiting")]),
    )
    graph = GraphConfig(
        owner=OWNER, workspace=str(d.workspace("graph")), profile="scripted", graph_id=f"g{uuid.uuid4().hex[:8]}", approve_plan="auto",
        graph=GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "first"}, {"id": "b", "prompt": "then", "depends_on": ["a"]}]}),
        script=d.script("graph", {"nodes": {
            node: [{"turns": [{"text": f"{node} done", "delay_seconds": GRAPH_NODE_SECONDS}], "review": {"verdict": "pass", "summary": "ok"}}]
            for node in "ab"
        }}),
    )
    await d.temporal.start_workflow(
        TASK_GRAPH_WORKFLOW, TaskGraphInput(config=graph), id=graph_workflow_id(graph.graph_id), task_queue=d.queue,
        search_attributes=TypedSearchAttributes([SearchAttributePair(SESSION_OWNER, OWNER), SearchAttributePair(SESSION_STATUS, "planning")]),
    )
    while not (task_ws / "one.txt").exists() or (await d.client.task_status(task.task_id)).status != "waiting":
        await asyncio.sleep(0.2)
    for c in sessions["busy"]:  # last: their model replies take BUSY_SECONDS, past the switch
        first_turns[c.session_id] = (await d.client.start(c, "go")).turn_id
    d.mark(f"build A serves {idle} idle, {waiting} approval-waiting and {busy} mid-turn sessions, a sleeping task, a running graph")
    all_sessions = [c for group in sessions.values() for c in group]
    before = [await d.pinned(session_workflow_id(c.session_id)) for c in all_sessions]

    d.start_worker("B")
    await d.make_current("B")
    d.mark("build B started and made current")
    watch = asyncio.create_task(_watch_drainage(d))
    approved_at = {}
    for c in sessions["waiting"]:
        await d.client.approve(c.session_id, asks[c.session_id])
        approved_at[c.session_id] = time.monotonic()
    d.mark(f"{len(approved_at)} approvals given after the switch")
    outcomes = {}
    for c in sessions["waiting"] + sessions["busy"]:
        outcomes[c.session_id] = await d.client.wait(c.session_id, first_turns[c.session_id], timeout_seconds=120)
    d.mark("every turn in flight at the switch has ended")
    nexts = await asyncio.gather(*(d.client.send_and_wait(c.session_id, "and next") for c in all_sessions))
    d.mark("every session answered one more turn")
    await d.client.nudge_task(task.task_id, reason="next part")
    task_result = await d.temporal.get_workflow_handle(task_workflow_id(task.task_id)).result()
    d.mark(f"task {task_result['status'] if isinstance(task_result, dict) else task_result.status} after its second session")
    graph_result = await d.temporal.get_workflow_handle(graph_workflow_id(graph.graph_id)).result()
    d.mark(f"graph {graph_result['status'] if isinstance(graph_result, dict) else graph_result.status}")
    after = [await d.pinned(session_workflow_id(c.session_id)) for c in all_sessions]
    task_build = await d.pinned(task_workflow_id(task.task_id))
    graph_build = await d.pinned(graph_workflow_id(graph.graph_id))
    switch_at = next(at for at, what in d.timeline if what.startswith("build B"))
    await watch
    drained_after = time.monotonic() - d.t0 - switch_at
    d.workers["A"].send_signal(signal.SIGTERM)
    d.workers["A"].wait(timeout=60)
    d.mark(f"build A stopped (exit {d.workers['A'].returncode})")
    await asyncio.gather(*(d.client.send_and_wait(c.session_id, "after A is gone") for c in sessions["idle"][:5]))
    d.mark("sessions answer with build A gone")

    failed = sum(1 for o in list(outcomes.values()) + list(nexts) if o.status != "completed")
    duplicated = 0
    for c in sessions["waiting"]:
        lines = (Path(c.workspace) / "effects.log").read_text().split()
        duplicated += len(lines) - 1 if lines else 0
        failed += 0 if lines else 1
    count = len(all_sessions)
    print(f"sessions per build before the switch: A={before.count('A')} B={before.count('B')}; after their next turn: A={after.count('A')} B={after.count('B')}")
    print(f"task ended on build {task_build}; graph ended on build {graph_build} (a graph moves after its running nodes)")
    print(f"failed turns: {failed}; duplicated effects: {duplicated}; approvals that landed after the switch: {len(approved_at)}")
    print(
        f"rolling_deploy sessions={count} on_b_after={after.count('B')} failed_turns={failed} duplicated_effects={duplicated} "
        f"approvals_after_switch={sum(1 for c in sessions['waiting'] if outcomes[c.session_id].status == 'completed')} drained_after={drained_after:.1f}"
    )
    return 0 if failed == 0 and duplicated == 0 and after.count("B") == count and task_build == "B" else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--waiting", type=int, default=15)
    parser.add_argument("--busy", type=int, default=15)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run's files (logs, store) here")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return asyncio.run(_run(args.workdir, args.idle, args.waiting, args.busy))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(_run(Path(tmp), args.idle, args.waiting, args.busy))


if __name__ == "__main__":
    sys.exit(main())
