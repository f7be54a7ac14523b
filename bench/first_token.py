"""Time to first token: what agentrt adds between a client's send and the first token delta it
receives, beside a direct call to the same provider in the same run.

    python -m bench.first_token [--delays-ms 300,1000,3000] [--repeats 5] [--stores postgresql,sqlite]
        [--chunks 20] [--postgres-admin-url URL]

Starts its own Temporal dev server (free ports, headless) and a loopback model
(``bench._paced_provider``: OpenAI Chat Completions, streamed; model ``paced-<ms>`` sends its first
token after ``<ms>`` milliseconds, then ``--chunks`` chunks 10 ms apart). Per store of
``--stores`` (PostgreSQL: a fresh database on the server at ``--postgres-admin-url``, dropped
after; SQLite: a file in the run directory) it starts ``agentrt worker`` and ``agentrt serve`` as
processes of their own, as a deployment runs them (the gateway hears the worker's writes through
PostgreSQL ``NOTIFY``; on SQLite, which cannot tell another process, its stream polls every
0.1 s while a model call is open), and for each first-token delay measures ``--repeats`` turns
by each path, one after another:

- **direct**: ``POST /chat/completions`` to the loopback model with a kept-alive ``httpx`` client,
  until the first text delta is parsed (the floor: what any application waits);
- **gateway**: the session's SSE stream (``GET /v1/sessions/{id}/stream``) is open, as a UI
  keeps it; from ``POST /v1/sessions/{id}/messages`` to the first ``ModelTokenDelta`` event;
- **gateway, new session**: from ``POST /v1/sessions`` (the first turn starts in the same
  request) to the first ``ModelTokenDelta`` of the stream opened once it answered;
- **python client**: ``AgentClient.send`` then ``AgentClient.deltas`` (the store, woken by its
  writes) to the first delta.

Every agentrt turn is waited to its end before the next starts, so turns do not overlap.
Printed: p50 / p95 ms per path, store and delay, and **added p50** = the path's p50 minus the
direct p50 of the same store and delay. The last line is exactly

    first_token worst_added_p50_ms=A gateway_added_p50_ms=B client_added_p50_ms=C delays_ms=D stores=E

(``worst``: the largest added p50 over every agentrt path, store and delay; ``gateway`` and
``client``: the largest of those paths). Exits 1 when any turn failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from httpx_sse import aconnect_sse
from psycopg import sql
from sqlalchemy.engine import make_url

from agentrt.client import AgentClient
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, connect_when_ready
from bench._cli import print_progress, run_and_exit
from bench._fleet_harness import die_with_parent, stop_process_groups

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKEN = "first-token-bench-token"
OWNER = "bench"
PATHS = ("direct", "gateway", "gateway, new session", "python client")
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class FirstTokenReport:
    delays_ms: list[int]
    repeats: int
    stores: list[str]
    # (ms from the send to the first token, ms from the send to the request reaching the model)
    samples: dict[tuple[str, str, int], list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    failures: list[str] = field(default_factory=list)
    load: str = ""

    def totals(self, key: tuple[str, str, int]) -> list[float]:
        return [total for total, _ in self.samples.get(key, [])]

    def p(self, key: tuple[str, str, int], q: float) -> float:
        values = sorted(self.totals(key))
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]

    def added(self, store: str, path: str, delay: int) -> float:
        return statistics.median(self.totals((store, path, delay))) - statistics.median(self.totals((store, "direct", delay)))

    def split(self, key: tuple[str, str, int], delay: int) -> tuple[float, float]:
        """p50 ms before the request reached the model, and after its first token was sent."""
        before = statistics.median(to_model for _, to_model in self.samples[key])
        after = statistics.median(total - to_model - delay for total, to_model in self.samples[key])
        return before, after

    def settings_text(self) -> str:
        return (
            f"delays={','.join(map(str, self.delays_ms))} ms repeats={self.repeats} stores={','.join(self.stores)}; "
            f"worker and gateway in processes of their own; load average while it ran: {self.load}"
        )

    def table(self) -> str:
        rows = [
            f"{'store':<11} {'delay ms':>8}  {'path':<21} {'n':>3} {'p50 ms':>8} {'p95 ms':>8} {'added p50 ms':>13}"
            f" {'to model':>9} {'after token':>12}"
        ]
        for store in self.stores:
            for delay in self.delays_ms:
                for path in PATHS:
                    key = (store, path, delay)
                    if not self.samples.get(key):
                        continue
                    added = "" if path == "direct" else f"{self.added(store, path, delay):13.1f}"
                    before, after = self.split(key, delay)
                    rows.append(
                        f"{store:<11} {delay:>8}  {path:<21} {len(self.samples[key]):>3} "
                        f"{statistics.median(self.totals(key)):8.1f} {self.p(key, 0.95):8.1f} {added:>13}"
                        f" {before:9.1f} {after:12.1f}"
                    )
        rows += [f"FAILED: {failure}" for failure in self.failures]
        return "\n".join(rows)

    def worst(self, paths: tuple[str, ...]) -> float:
        values = [
            self.added(store, path, delay) for store in self.stores for delay in self.delays_ms for path in paths
            if self.samples.get((store, path, delay))
        ]
        return max(values) if values else float("nan")

    def line(self) -> str:
        return (
            f"first_token worst_added_p50_ms={self.worst(PATHS[1:]):.1f} "
            f"gateway_added_p50_ms={self.worst(PATHS[1:3]):.1f} client_added_p50_ms={self.worst(PATHS[3:]):.1f} "
            f"delays_ms={','.join(map(str, self.delays_ms))} stores={','.join(self.stores)}"
        )


_ARRIVED = re.compile(r"^\[(\d+\.\d+)\]")


def _first_text(data: str) -> str:
    """The text of the Chat Completions chunk ``data`` ("" for none)."""
    if data == "[DONE]":
        return ""
    choices = json.loads(data).get("choices") or []
    return "".join((choice.get("delta") or {}).get("content") or "" for choice in choices)


def sample(began: float, first: float, text: str) -> tuple[float, float]:
    """(ms from ``began`` to ``first``, ms from ``began`` to the model's arrival stamp in ``text``);
    times are ``time.time()`` seconds (the model runs in another process)."""
    match = _ARRIVED.match(text)
    if match is None:
        raise RuntimeError(f"the first token {text[:40]!r} carries no arrival time")
    return (first - began) * 1000, (float(match.group(1)) - began) * 1000


async def direct(http: httpx.AsyncClient, base_url: str, delay: int) -> tuple[float, float]:
    """The first token of model ``paced-<delay>`` called directly (``sample``)."""
    body = {"model": f"paced-{delay}", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    began = time.time()
    first, text = 0.0, ""
    async with aconnect_sse(http, "POST", f"{base_url}/chat/completions", json=body) as source:
        async for event in source.aiter_sse():
            if not first and (text := _first_text(event.data)):
                first = time.time()
    return sample(began, first, text)


class _Stack:
    """One store's worker and gateway processes, and the clients of the run."""

    def __init__(self, run_dir: Path, address: str, provider_port: int, store: str, url: str, delays: list[int]) -> None:
        self.run_dir, self.address, self.store, self.url = run_dir, address, store, url
        self.task_queue = f"first-token-{store}-{uuid.uuid4().hex[:6]}"
        self.workspace = run_dir / "root" / "ws"
        self.workspace.mkdir(parents=True)
        profiles = "".join(
            f'[profiles.paced-{d}]\nprovider = "openai"\nmodel = "paced-{d}"\nbase_url = "http://127.0.0.1:{provider_port}"\n'
            "context_window = 32000\nmax_output_tokens = 1000\ntimeout_seconds = 60\n\n"
            for d in delays
        )
        self.config = run_dir / "agentrt.toml"
        self.config.write_text(
            f'default_profile = "paced-{delays[0]}"\n\n{profiles}'
            f'[temporal]\naddress = "{address}"\ntask_queue = "{self.task_queue}"\n\n'
            f'[store]\nurl = "{url}"\n\n[codec]\nencryption = false\n'
        )
        self.processes: list[subprocess.Popen[bytes]] = []
        self.gateway_url = ""

    def _env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("AGENTRT_")}
        env.update({
            "AGENTRT_CONFIG": str(self.config), "AGENTRT_HOME": str(self.run_dir / "home"),
            "AGENTRT_GATEWAY_TOKEN": TOKEN, "AGENTRT_GATEWAY_PRINCIPAL": OWNER,
            "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        })
        return env

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "agentrt.cli", *args], cwd=self.run_dir, env=self._env(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
            )
        self.processes.append(process)
        return process

    async def start(self) -> None:
        worker_log, gateway_log = self.run_dir / "worker.log", self.run_dir / "gateway.log"
        worker = self._spawn(["worker"], worker_log)
        gateway = self._spawn(["serve", "--port", "0", "--workspace-root", str(self.workspace.parent)], gateway_log)
        limit = time.monotonic() + 120
        while "worker polling" not in worker_log.read_text(errors="replace"):
            if worker.poll() is not None or time.monotonic() > limit:
                raise RuntimeError(f"the worker did not start; see {worker_log}")
            await asyncio.sleep(0.1)
        while not (match := re.search(r"listening on (http://\S+) ", gateway_log.read_text(errors="replace"))):
            if gateway.poll() is not None or time.monotonic() > limit:
                raise RuntimeError(f"the gateway did not start; see {gateway_log}")
            await asyncio.sleep(0.1)
        self.gateway_url = match.group(1)

    def stop(self) -> None:
        stop_process_groups(self.processes)


AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _first_delta(
    http: httpx.AsyncClient, session_id: str, last_id: str | None, opened: asyncio.Future[None]
) -> tuple[float, str, str]:
    """Read the session's stream after ``last_id`` until its turn ends: (the time the first
    ``ModelTokenDelta`` arrived, its text, the id of the ``TurnEnded`` item)."""
    headers = {**AUTH, **({"Last-Event-ID": last_id} if last_id else {})}
    first, text = 0.0, ""
    async with aconnect_sse(http, "GET", f"/v1/sessions/{session_id}/stream", headers=headers) as source:
        if not opened.done():
            opened.set_result(None)  # the stream is open: the send may go
        async for event in source.aiter_sse():
            if event.event == "ModelTokenDelta" and not first:
                first, text = time.time(), json.loads(event.data)["text"]
            if event.event == "TurnEnded":
                return first, text, event.id
    raise RuntimeError(f"the stream of session {session_id} ended before its turn did")


async def gateway_turns(report: FirstTokenReport, stack: _Stack, delay: int, repeats: int) -> None:
    """The gateway rows of ``delay``: a new session per repeat (its first turn), then turns of one
    session with its stream open."""
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=120) as http:
        session_id, last_id = "", None
        for n in range(repeats):
            began = time.time()
            created = await http.post(
                "/v1/sessions", headers=AUTH, json={"text": f"hello {n}", "profile": f"paced-{delay}", "workspace": "ws"}
            )
            if created.status_code != 201:
                report.failures.append(f"POST /v1/sessions: {created.status_code} {created.text[:200]}")
                return
            opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            first, text, last_id = await _first_delta(http, created.json()["session_id"], None, opened)
            report.samples[(stack.store, "gateway, new session", delay)].append(sample(began, first, text))
            session_id = created.json()["session_id"]
        for n in range(repeats):
            opened = asyncio.get_running_loop().create_future()
            reading = asyncio.create_task(_first_delta(http, session_id, last_id, opened))
            await opened
            began = time.time()
            sent = await http.post(f"/v1/sessions/{session_id}/messages", headers=AUTH, json={"text": f"again {n}"})
            if sent.status_code != 202:
                reading.cancel()
                report.failures.append(f"POST messages: {sent.status_code} {sent.text[:200]}")
                return
            first, text, last_id = await reading
            report.samples[(stack.store, "gateway", delay)].append(sample(began, first, text))


async def client_turns(report: FirstTokenReport, client: AgentClient, stack: _Stack, delay: int, repeats: int) -> None:
    config = client.new_config(str(stack.workspace), profile=f"paced-{delay}")
    started = await client.start(config, "hello")
    await client.wait(started.session_id, started.turn_id)
    for n in range(repeats):
        began = time.time()
        sent = await client.send(started.session_id, f"again {n}")
        first, text = 0.0, ""
        async for delta in client.deltas(started.session_id, sent.turn_id):
            if not first:
                first, text = time.time(), delta.text
        outcome = await client.wait(started.session_id, sent.turn_id)
        if outcome.status != "completed" or not first:
            report.failures.append(f"python client turn {sent.turn_id}: {outcome.status}, first delta seen: {bool(first)}")
            continue
        report.samples[(stack.store, "python client", delay)].append(sample(began, first, text))


def _postgres_database(admin_url: str) -> str:
    name = f"agentrt_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_url(admin_url).set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)


def _drop_database(admin_url: str, url: str) -> None:
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(make_url(url).database)))


async def run(delays: list[int], repeats: int, stores: list[str], chunks: int, admin_url: str) -> FirstTokenReport:
    report = FirstTokenReport(delays, repeats, stores)
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="agentrt-first-token-") as tmp:
        root = Path(tmp)
        port_file = root / "provider.port"
        provider = subprocess.Popen(
            [sys.executable, "-m", "bench._paced_provider", "--port-file", str(port_file), "--chunks", str(chunks)],
            cwd=REPO_ROOT, preexec_fn=die_with_parent,
        )
        try:
            async with DevServer.on_free_ports(root / "server") as server:
                while not port_file.exists() or not port_file.read_text():
                    await asyncio.sleep(0.05)
                port = int(port_file.read_text())
                base_url = f"http://127.0.0.1:{port}"
                for store in stores:
                    run_dir = root / store
                    run_dir.mkdir()
                    url = _postgres_database(admin_url) if store == "postgresql" else f"sqlite:///{run_dir / 'agentrt.db'}"
                    stack = _Stack(run_dir, server.address, port, store, url, delays)
                    opened = await asyncio.to_thread(Store.open, url)
                    try:
                        await stack.start()
                        plugin = AgentrtPlugin(AgentrtConfig.load(stack.config, env={}), opened)
                        temporal = await connect_when_ready(server.address, "default", [plugin])
                        client = AgentClient(temporal, task_queue=stack.task_queue, principal=OWNER, store=opened)
                        async with httpx.AsyncClient(timeout=60) as http:
                            await direct(http, base_url, 0)  # a kept-alive connection, as an application keeps one
                            for delay in delays:
                                print_progress(f"[first_token] {store}: first token after {delay} ms, {repeats} turns per path")
                                for _ in range(repeats):
                                    report.samples[(store, "direct", delay)].append(await direct(http, base_url, delay))
                                await gateway_turns(report, stack, delay, repeats)
                                await client_turns(report, client, stack, delay, repeats)
                                loads.append(os.getloadavg()[0])
                    finally:
                        stack.stop()
                        opened.close()
                        if store == "postgresql":
                            _drop_database(admin_url, url)
        finally:
            provider.kill()
            provider.wait()
    report.load = f"{min(loads):.1f}-{max(loads):.1f} (1-minute, 2 cores)" if loads else "?"
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.first_token", description=__doc__.split("\n\n")[0])
    parser.add_argument("--delays-ms", default="300,1000,3000", help="first-token delays of the model (ms)")
    parser.add_argument("--repeats", type=int, default=5, help="turns per path, store and delay")
    parser.add_argument("--stores", default="postgresql,sqlite", help="postgresql, sqlite or both")
    parser.add_argument("--chunks", type=int, default=20, help="text chunks per answer")
    parser.add_argument("--postgres-admin-url", default=os.environ.get("AGENTRT_TEST_POSTGRES_ADMIN_URL", DEFAULT_ADMIN_URL))
    args = parser.parse_args(argv)
    delays = [int(d) for d in args.delays_ms.split(",") if d]
    stores = [s for s in args.stores.split(",") if s]
    unknown = [s for s in stores if s not in ("postgresql", "sqlite")]
    if unknown or not delays or args.repeats < 1:
        parser.error(f"--stores takes postgresql and sqlite (not {unknown}); --delays-ms and --repeats at least one")
    run_and_exit(
        lambda: run(delays, args.repeats, stores, args.chunks, args.postgres_admin_url),
        lambda report: not report.failures, settings=True,
    )


if __name__ == "__main__":
    main()
