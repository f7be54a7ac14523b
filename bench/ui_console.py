"""What an operator sees of agentrt in the Temporal UI, shot with headless Chromium.

    python -m bench.ui_console [--out /tmp/ui-shots] [--owner alice] [--chromium chromium] [--keep]

Run by hand (not part of ``make test``). Needs Chromium (Debian: ``apt-get install chromium``).
Starts its own Temporal dev server with its UI (free ports, database in a temporary
directory), a SQLite store and a worker; starts a session owned by ``--owner`` whose scripted
model asks to write ``NOTES.md``, which waits for approval, and a task graph whose plan waits
for approval. Once the workflow list shows both, it writes (PNG, 1600x1000) to ``--out``:

1. ``list-waiting.png``: the workflow list filtered by
   ``AgentPendingApprovals > 0 AND AgentOwner = '<owner>'`` (the UI's ``query=`` parameter);
2. ``session.png``: the waiting session's page, tab User Metadata: its summary and details and
   its current details, with the JSON to paste into **Send an Update** ``decide``;
3. ``session-timeline.png``: the same session's timeline, each activity labelled by its summary;
4. ``list-after.png``: the same filter once the session was approved with exactly the JSON its
   details show (sent as plain JSON, as the UI sends it) and its turn ended: the graph is left.

The list is shot with ``chromium --headless ... --screenshot=FILE --window-size=1600,1000 URL``
(and ``--virtual-time-budget``, so the UI's requests finish first). A workflow's page never
settles that way (it keeps a history long-poll open: the screenshot is blank at load, and a
virtual time budget never runs out), so those are shot with the same flags over the DevTools
protocol on a pipe (``--remote-debugging-pipe``): navigate, wait for the page's text, capture.
It prints each file and the URLs; ``--keep`` leaves the stack running (until Ctrl-C) for a
look in a browser of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from agentrt.client import AgentClient, connect
from agentrt.schemas import (
    TASK_GRAPH_WORKFLOW,
    GraphConfig,
    GraphSpec,
    PermissionRequested,
    TaskGraphInput,
    graph_workflow_id,
    session_workflow_id,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker, free_port

WIDTH, HEIGHT = 1600, 1000
# How long Chromium lets the list page's own requests run before it shoots (virtual milliseconds).
RENDER_BUDGET_MS = 15_000
# How long a workflow page gets to show its text, and to finish drawing after that (seconds).
PAGE_TIMEOUT = 30.0
SETTLE_SECONDS = 2.0
HEADLESS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", f"--window-size={WIDTH},{HEIGHT}",
]


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``command`` in its own process group, killed whole (renderers too) if it outlasts ``timeout`` seconds."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def shoot(binary: str, png: Path, url: str) -> Path:
    """A screenshot of ``url`` by ``chromium --headless --screenshot`` in a fresh profile (deleted afterwards)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        command = [binary, *HEADLESS, f"--user-data-dir={profile}", f"--screenshot={png}",
                   f"--virtual-time-budget={RENDER_BUDGET_MS}", "--hide-scrollbars", url]
        done = _run(command, timeout=120)
    if done.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium failed ({done.returncode}) on {url}: {done.stderr[-2000:]}")
    return png


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (fd 3 in, fd 4 out; each
    message JSON ended by a NUL byte), for pages that never settle. ``with Browser(...) as b``."""

    def __init__(self, binary: str) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")
        to_child, self._commands = os.pipe()
        self._replies, from_child = os.pipe()
        command = [binary, *HEADLESS, f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe", "about:blank"]
        # posix_spawn places the pipe ends at fds 3 and 4 of the child (its DUP2 clears close-on-exec;
        # every other fd of this process is not inherited), in a session of its own, output to /dev/null.
        self._pid = os.posix_spawnp(
            binary, command, os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, to_child, 3),
                (os.POSIX_SPAWN_DUP2, from_child, 4),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self._session = self.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False, timeout: float = 30.0) -> dict[str, Any]:
        """Send one DevTools command (to the page when ``session``) and return its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            if select.select([self._replies], [], [], 0.5)[0]:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium exited during {method}")
                self._buffer += chunk
        raise TimeoutError(f"chromium did not answer {method} within {timeout:g} s")

    def shoot(self, png: Path, url: str, wait_for: str) -> Path:
        """Open ``url``, wait until the page's text (or a frame's) holds ``wait_for`` (at most ``PAGE_TIMEOUT``
        seconds, then ``SETTLE_SECONDS`` more for it to finish drawing) and capture it to ``png``."""
        self.call("Page.navigate", {"url": url}, session=True)
        # The UI renders markdown (summaries, details) in same-origin iframes: their text counts too.
        probe = (
            "[document, ...Array.from(document.querySelectorAll('iframe'), f => f.contentDocument)]"
            f".some(d => d && d.body && d.body.innerText.includes({json.dumps(wait_for)}))"
        )
        deadline = time.monotonic() + PAGE_TIMEOUT
        while not self.call("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=True)["result"].get("value"):
            if time.monotonic() > deadline:
                shown = self._capture(png.with_suffix(".timeout.png"))
                raise TimeoutError(f"{url} did not show {wait_for!r} within {PAGE_TIMEOUT:g} s (what it showed: {shown})")
            time.sleep(0.5)
        time.sleep(SETTLE_SECONDS)
        return self._capture(png)

    def _capture(self, png: Path) -> Path:
        png.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]))
        return png

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        deadline = time.monotonic() + 10
        while os.waitpid(self._pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.killpg(self._pid, signal.SIGKILL)  # the browser and its renderers
                os.waitpid(self._pid, 0)
                break
            time.sleep(0.1)
        os.close(self._commands)
        os.close(self._replies)
        self._profile.cleanup()


def shoot_session(binary: str, out: Path, page_url: str) -> list[Path]:
    """The session's User Metadata tab (summary, details, current details) and its timeline."""
    with Browser(binary) as browser:
        return [
            browser.shoot(out / "session.png", f"{page_url}/user-metadata", "Send an Update"),
            browser.shoot(out / "session-timeline.png", f"{page_url}/timeline", "provider.complete"),
        ]


async def wait_listed(temporal: Client, query: str, expected: set[str], timeout: float = 30.0) -> None:
    """Until the workflow list for ``query`` is exactly ``expected`` (visibility trails the upsert)."""
    async with asyncio.timeout(timeout):
        while {w.id async for w in temporal.list_workflows(query)} != expected:
            await asyncio.sleep(0.2)


async def approve_json(temporal: Client, workflow_id: str) -> dict[str, object]:
    """The JSON the session's current details give for **Send an Update** ``decide`` (approve)."""
    metadata = await temporal.get_workflow_handle(workflow_id).query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    found = re.search(r"Approve: Send an Update `decide`[^:]*: `(\{[^`]*\})`", metadata.current_details)
    if found is None:
        raise RuntimeError(f"no approve JSON in the current details of {workflow_id}:\n{metadata.current_details}")
    return json.loads(found.group(1))


async def start_waiting_work(client: AgentClient, temporal: Client, root: Path, task_queue: str) -> tuple[str, str, str]:
    """A session waiting for the approval of a write and a graph waiting for its plan's: the
    session's id and turn id, and the graph's workflow id."""
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# A small project\n")
    script = root / "session.json"
    script.write_text(json.dumps({"turns": [
        {"text": "I will write the notes.", "tool_calls": [{"name": "fs.write", "arguments": {"path": "NOTES.md", "content": "# Notes\n"}}]},
        {"text": "NOTES.md is written."},
    ]}))
    config = client.new_config(str(workspace), profile="scripted", script=str(script), title="write the notes")
    started = await client.start(config, "Write NOTES.md with a title.")
    async with asyncio.timeout(60):
        while not any(isinstance(e, PermissionRequested) for e in (await client.events(config.session_id)).events):
            await asyncio.sleep(0.2)
    graph_script = root / "graph.json"
    graph_script.write_text(json.dumps({"nodes": {"a": [{"turns": [{"text": "summary written"}]}]}}))
    graph = GraphConfig(
        graph_id=f"g{uuid.uuid4().hex[:8]}", owner=client.principal, workspace=str(workspace), profile="scripted",
        script=str(graph_script), approve_plan="ask", tools=["fs.write"],
        graph=GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "write a summary"}]}),
    )
    await temporal.start_workflow(
        TASK_GRAPH_WORKFLOW, TaskGraphInput(config=graph), id=graph_workflow_id(graph.graph_id), task_queue=task_queue,
        static_summary=f"graph {graph.graph_id} · one node",
    )
    return config.session_id, started.turn_id, graph_workflow_id(graph.graph_id)


async def main(out: Path, owner: str, binary: str, keep: bool) -> None:
    if shutil.which(binary) is None:
        raise SystemExit(f"{binary} not found: install Chromium (Debian: apt-get install chromium) or pass --chromium")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ui-console-") as tmp:
        root = Path(tmp)
        server = DevServer(
            port=free_port(), ui_port=free_port(), db_file=root / "temporal.db", log_file=root / "temporal.log",
            extra_args=["--http-port", str(free_port()), "--metrics-port", str(free_port())],
        )
        await server.start()
        try:
            config = AgentrtConfig(
                temporal_address=server.address, task_queue=f"ui-{uuid.uuid4().hex[:6]}", database_url=f"sqlite:///{root / 'agentrt.db'}"
            )
            store = Store.open(config.database_url)
            temporal = await connect(server.address, plugin=AgentrtPlugin(config, store))
            client = AgentClient(temporal, task_queue=config.task_queue, principal=owner, store=store)
            async with build_worker(temporal, config, store):
                session_id, turn_id, graph = await start_waiting_work(client, temporal, root, config.task_queue)
                session = session_workflow_id(session_id)
                query = f"AgentPendingApprovals > 0 AND AgentOwner = '{owner}'"
                await wait_listed(temporal, query, {session, graph})
                run_id = (await temporal.get_workflow_handle(session).describe()).run_id
                base = f"{server.ui_url}/namespaces/default/workflows"
                list_url = f"{base}?query={quote(query)}"
                page_url = f"{base}/{quote(session)}/{run_id}"
                # Chromium runs in threads: this process's worker must answer the UI's queries meanwhile.
                shots = [await asyncio.to_thread(shoot, binary, out / "list-waiting.png", list_url)]
                shots += await asyncio.to_thread(shoot_session, binary, out, page_url)
                body = await approve_json(temporal, session)
                await temporal.get_workflow_handle(session).execute_update("decide", body)
                await client.wait(session_id, turn_id)
                await wait_listed(temporal, query, {graph})
                shots.append(await asyncio.to_thread(shoot, binary, out / "list-after.png", list_url))
                for png in shots:
                    print(f"wrote {png}")
                print(f"list:    {list_url}\nsession: {page_url}/user-metadata\napproved with update decide {json.dumps(body)}")
                if keep:
                    print(f"Temporal UI at {server.ui_url}; Ctrl-C (or SIGTERM) stops it")
                    stop = asyncio.Event()
                    for signum in (signal.SIGINT, signal.SIGTERM):
                        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
                    await stop.wait()
            store.close()
        finally:
            server.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/ui-shots"))
    parser.add_argument("--owner", default="alice")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--keep", action="store_true", help="leave the stack running until Ctrl-C")
    args = parser.parse_args()
    asyncio.run(main(args.out, args.owner, args.chromium, args.keep))


if __name__ == "__main__":
    cli()
