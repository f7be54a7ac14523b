"""The processes ``bench.long_stream`` runs beside its own: a Temporal dev server, the paced model
(``bench._paced_provider``), an agentrt worker (``agentrt worker``, the command) and the gateway
(``bench._gateway_process``), each child in a session of its own that dies with the benchmark
(``die_with_parent``), its output in a log file of the run directory.

``Stack.start`` writes the run's ``agentrt.toml`` (the ``paced`` profile, an OpenAI-compatible
model at the provider's port; the task queue; the store; encryption off) and starts them in
order; ``Stack.stop`` ends them (SIGTERM, then SIGKILL after 30 s) and the server.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agentrt.worker import DevServer
from bench._fleet_harness import die_with_parent

REPO_ROOT = Path(__file__).resolve().parents[1]
PRINCIPAL = "bench"
PROFILE = "paced"
# The dev server's SQLite in WAL mode without fsync, as bench.concurrency runs it.
SERVER_ARGS = ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=off"]


def rss_mb(pid: int, field_name: str = "VmRSS") -> float:
    """A process's resident set size now (``VmRSS``) or at its peak (``VmHWM``), MiB, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load_average() -> str:
    """The first three fields of /proc/loadavg (1, 5 and 15 minutes)."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


@dataclass
class Stack:
    run_dir: Path
    chunks: int
    chunk_ms: float
    max_streams_per_principal: int
    suggest_continue_as_new: int = 0  # history events; 0: the server's default
    database_url: str = ""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    server: DevServer | None = None
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    gateway_url: str = ""
    config_path: Path | None = None

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.run_dir / 'agentrt.db'}"

    @property
    def task_queue(self) -> str:
        return f"long-stream-{self.run_dir.name}"

    @property
    def gateway_pid(self) -> int:
        return self.children["gateway"].pid

    @property
    def workspace_root(self) -> Path:
        return self.run_dir / "ws"

    async def start(self) -> Stack:
        extra = list(SERVER_ARGS)
        if self.suggest_continue_as_new:
            extra += ["--dynamic-config-value", f"limit.historyCount.suggestContinueAsNew={self.suggest_continue_as_new}"]
        self.server = DevServer.on_free_ports(self.run_dir / "server", extra)
        await self.server.start()
        provider_port = await self.start_provider()
        self.config_path = self.write_config(provider_port, self.server.address)
        self._spawn("worker", ["-m", "agentrt.cli", "worker"])
        await asyncio.gather(self._log_line("worker", "worker polling"), self.start_gateway())  # both start at once
        return self

    async def start_provider(self) -> int:
        """Start the paced model; returns its port once it listens."""
        port_file = self.run_dir / "provider.port"
        self._spawn("provider", [
            "-m", "bench._paced_provider", "--port-file", str(port_file),
            "--chunks", str(self.chunks), "--chunk-ms", str(self.chunk_ms),
        ])
        return int(await self._file_text("provider", port_file))

    async def start_gateway(self, port: int = 0) -> None:
        """Start the gateway on ``port`` (0: any free one) and wait until it listens; sets
        ``gateway_url``. Needs ``config_path`` (``write_config``)."""
        self.workspace_root.mkdir(parents=True, exist_ok=True)
        port_file = self.run_dir / "gateway.port"
        port_file.unlink(missing_ok=True)
        self._spawn("gateway", [
            "-m", "bench._gateway_process", "--port-file", str(port_file), "--workspace-root", str(self.workspace_root),
            "--port", str(port), "--max-streams-per-principal", str(self.max_streams_per_principal),
        ])
        self.gateway_url = f"http://127.0.0.1:{int(await self._file_text('gateway', port_file))}"

    def kill_gateway(self) -> None:
        """SIGKILL the gateway's process group and reap it: its open streams break mid-item."""
        process = self.children["gateway"]
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    async def restart_worker(self) -> None:
        """Start another worker (after the last one died) and wait until it polls."""
        log = self.run_dir / "worker.log"
        before = log.read_text(errors="replace").count("worker polling")
        self._spawn("worker", ["-m", "agentrt.cli", "worker"])
        deadline = time.monotonic() + 120
        while log.read_text(errors="replace").count("worker polling") <= before:
            self._check_alive("worker")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready after 120 s; see {log}")
            await asyncio.sleep(0.1)

    def write_config(self, provider_port: int, temporal_address: str) -> Path:
        """The run's ``agentrt.toml`` (see the module docstring); sets and returns ``config_path``."""
        path = self.run_dir / "agentrt.toml"
        path.write_text(
            f'default_profile = "{PROFILE}"\n\n'
            f"[profiles.{PROFILE}]\n"
            'provider = "openai"\nmodel = "paced-fake"\n'
            f'base_url = "http://127.0.0.1:{provider_port}"\n'
            "context_window = 2000000\nmax_output_tokens = 8000\ntimeout_seconds = 120\n\n"
            "[temporal]\n"
            f'address = "{temporal_address}"\ntask_queue = "{self.task_queue}"\n\n'
            f'[store]\nurl = "{self.store_url}"\n\n'
            "[codec]\nencryption = false\n"
        )
        self.config_path = path
        return path

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("AGENTRT_")}
        env.update({
            "AGENTRT_HOME": str(self.run_dir / "home"),
            "AGENTRT_GATEWAY_TOKEN": self.token,
            "AGENTRT_GATEWAY_PRINCIPAL": PRINCIPAL,
            "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        })
        if self.config_path is not None:
            env["AGENTRT_CONFIG"] = str(self.config_path)
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.run_dir / f"{name}.log"
        with open(log, "ab") as out:
            self.children[name] = subprocess.Popen(
                [sys.executable, *args], cwd=self.run_dir, env=self.env(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
            )

    def _check_alive(self, name: str) -> None:
        process = self.children[name]
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}; see {self.run_dir / (name + '.log')}")

    async def _file_text(self, name: str, path: Path, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while not (path.exists() and path.read_text().strip()):
            self._check_alive(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {timeout:g} s; see {self.run_dir / (name + '.log')}")
            await asyncio.sleep(0.05)
        return path.read_text().strip()

    async def _log_line(self, name: str, text: str, timeout: float = 120.0) -> None:
        log = self.run_dir / f"{name}.log"
        deadline = time.monotonic() + timeout
        while text not in log.read_text(errors="replace"):
            self._check_alive(name)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {timeout:g} s; see {log}")
            await asyncio.sleep(0.1)

    async def hub_counters(self) -> dict[str, int]:
        """The gateway's ``StreamHub`` counters (``GET /bench/hub``)."""
        async with httpx.AsyncClient(base_url=self.gateway_url, timeout=30) as http:
            return (await http.get("/bench/hub")).json()

    def stop(self) -> None:
        for process in reversed(list(self.children.values())):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.children.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self.server is not None:
            self.server.stop()
