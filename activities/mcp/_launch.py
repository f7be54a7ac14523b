"""How the worker reaches a configured MCP server: a stdio server spawned in its own directory
with a small environment, in the OS sandbox ``shell.run`` uses (bubblewrap) unless its
configuration says ``sandbox = "none"``; an HTTP server through a client with its headers.
``${VAR}`` references in ``env`` and ``headers`` expand from the worker's environment, and the
values they expand to are secrets, redacted from what the worker reports. Declared secrets
(``secrets``, ``${secret:NAME}``) are read from the worker's secret sources (``SecretVault``) at
each launch and recorded as ``[secret:NAME]`` wherever they show.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp.client.streamable_http import streamable_http_client
from agentrt.activities.mcp._bounded_http import bounded_http_client
from agentrt.activities.mcp._diagnostics import STATUS_WRAPPER, StderrTail
from agentrt.activities.tools import (
    EgressProxy,
    SecretVault,
    egress_environment,
    parse_egress_allow,
    redact_secrets,
    sandbox_status,
    sandboxed_argv,
)
from agentrt.schemas import SECRET_REFERENCE, VARIABLE_REFERENCE, McpServerConfig, McpServerUnavailable, ToolError

# PATH of a stdio server's process (its configured env may change it).
SERVER_PATH = "/usr/local/bin:/usr/bin:/bin"
# The most bytes one message (one line) of a stdio server may hold: more than the largest result
# kept (a saved file of ``MAX_SAVED_FILE_BYTES``, base64-encoded, in its JSON). A longer line is
# dropped while it is read (``_relay.py``) and the call it answered fails with ``McpToolError``.
MAX_MESSAGE_BYTES = 48 * 1024 * 1024
_RELAY = Path(__file__).with_name("_relay.py")
_VARIABLE = VARIABLE_REFERENCE
# ``${secret:NAME}`` (group 1) or ``${VAR}`` (group 2).
_REFERENCE = re.compile(f"{SECRET_REFERENCE.pattern}|{VARIABLE_REFERENCE.pattern}")


class Launcher:
    """Opens transports to the servers of ``configs`` (by name). ``home``: the agentrt home (a
    stdio server's default directory is ``home/mcp/NAME``, its log ``home/mcp/NAME.log``);
    ``env``: the environment ``${VAR}`` references read, kept as given (a live ``os.environ``
    is read at each use); ``vault``: where declared secrets are read (default: ``env`` itself);
    ``max_message_bytes``: the bound on one line of a stdio server's stdout and on an HTTP server's
    answer (``MAX_MESSAGE_BYTES``)."""

    def __init__(
        self,
        configs: Mapping[str, McpServerConfig],
        *,
        home: Path,
        env: Mapping[str, str],
        vault: SecretVault | None = None,
        egress_allow: Sequence[str] = (),
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._configs = configs
        self._home = home
        self._env = env
        self._vault = vault or SecretVault(env=env)
        self._egress = parse_egress_allow(egress_allow)
        self._max_message_bytes = max_message_bytes

    def secrets(self) -> list[str]:
        """The values ``${VAR}`` references in the servers' ``env`` and ``headers`` expand to (set,
        non-empty ones), sorted."""
        found: set[str] = set()
        for config in self._configs.values():
            for value in [*config.env.values(), *config.headers.values()]:
                for name in _VARIABLE.findall(value):
                    if self._env.get(name):
                        found.add(self._env[name])
        return sorted(found)

    def redact(self, text: str) -> str:
        """``text`` with each declared secret's value read in this process replaced by
        ``[secret:NAME]`` (``redact_secrets``), then each of ``secrets()`` (longest first) by ``[redacted]``."""
        text = redact_secrets(text)
        for secret in sorted(self.secrets(), key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text

    def log_path(self, config: McpServerConfig) -> Path:
        """Where the stderr of the last connection to a stdio server is written."""
        return self._home / "mcp" / f"{config.name}.log"

    async def transport(self, config: McpServerConfig, stack: AsyncExitStack) -> tuple[Any, StderrTail | None]:
        """``(transport, stderr)``: the SDK transport (an async context manager giving the read and
        write streams) for ``config``, and a stdio server's stderr (None over HTTP). What the
        transport needs beyond it (the stderr pipe, the HTTP client) is closed by ``stack``.

        Raises ``McpServerUnavailable`` (a ``${VAR}`` is not set, or the sandbox cannot run)."""
        if config.transport == "stdio":
            egress_dir = None
            if config.network and config.sandbox != "none":
                # A sandboxed server's network is an egress proxy for as long as the connection lasts.
                proxy = EgressProxy(self._egress)
                try:
                    egress_dir = proxy.start()
                except OSError as err:
                    raise McpServerUnavailable(config.name, f"the egress proxy for its network cannot start: {err}") from err
                stack.callback(proxy.close)
            parameters = await asyncio.to_thread(self.stdio_parameters, config, egress_dir)
            stderr = await StderrTail.open()
            stack.push_async_callback(stderr.aclose)
            return stdio_client(parameters, errlog=stderr.writer), stderr
        assert config.url is not None
        # Off the event loop: a secret-manager hook may take its time.
        headers = await asyncio.to_thread(lambda: {**self.expand(config, config.headers, "headers"), **self.declared(config)})
        http = await stack.enter_async_context(bounded_http_client(headers, self._max_message_bytes))
        return streamable_http_client(config.url, http_client=http, max_sse_event_size=self._max_message_bytes), None

    def stdio_parameters(self, config: McpServerConfig, egress_dir: str | None = None) -> StdioServerParameters:
        """How to spawn a stdio server (runs in a thread: it creates directories and may probe the
        sandbox). Its environment is ``PATH``, ``HOME`` (its directory), ``LANG`` and its expanded
        ``env``, nothing of the worker's; values reach it through the process environment,
        never its command line. It runs under ``/bin/sh``, which reports its exit status on
        stderr for diagnostics. A sandboxed server with ``network`` reaches out through the egress
        proxy whose directory is ``egress_dir`` (as ``shell.run`` does). Raises
        ``McpServerUnavailable`` as ``transport`` does."""
        assert config.command is not None
        cwd = self.cwd(config)
        cwd.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": SERVER_PATH, "HOME": str(cwd), "LANG": "C.UTF-8", **self.expand(config, config.env, "env"),
            **self.declared(config),
        }
        # stdio_client adds some of the worker's variables (HOME, USER ...); unset the others.
        inherited = [name for name in DEFAULT_INHERITED_ENV_VARS if name not in env]
        command = ["/bin/sh", "-c", STATUS_WRAPPER, "agentrt-mcp", config.command, *config.args]
        if config.sandbox == "none":
            unset = [arg for name in inherited for arg in ("-u", name)]
            argv = [shutil.which("env") or "/usr/bin/env", *unset, "--", *command]
        else:
            status = sandbox_status()
            if not status.available or status.path is None:
                raise McpServerUnavailable(
                    config.name,
                    f"the OS sandbox (bubblewrap) cannot run on this worker, so the server was not started "
                    f"(it would run unsandboxed only with sandbox = \"none\"): {status.reason}",
                )
            read_paths = [_host_path(p, cwd) for p in config.read_paths]
            if config.network:
                env = {**env, **egress_environment()}
            argv = sandboxed_argv(
                status.path, command, cwd, config.sandbox, network=config.network, env={}, read_paths=read_paths,
                egress_dir=egress_dir, proxy_env=False,
            )
            argv = _environment_through_process(argv, inherited)
        # Read through the relay: each line the server writes is bounded while it is read.
        relayed = [sys.executable, "-I", str(_RELAY), str(self._max_message_bytes), "--", *argv]
        return StdioServerParameters(command=relayed[0], args=relayed[1:], env=env, cwd=cwd)

    def cwd(self, config: McpServerConfig) -> Path:
        """A stdio server's directory, resolved: its ``cwd`` (relative to the home), else ``home/mcp/NAME``."""
        if config.cwd is None:
            return (self._home / "mcp" / config.name).resolve()
        path = Path(config.cwd).expanduser()
        return (path if path.is_absolute() else self._home / path).resolve()

    def declared(self, config: McpServerConfig) -> dict[str, str]:
        """The server's ``secrets`` table with each secret's value, read from the vault now. Raises
        ``McpServerUnavailable`` when one cannot be read (``SecretNotFound``, ``SecretSourceFailed``)."""
        try:
            values = self._vault.resolve(sorted(set(config.secrets.values())), f"mcp:{config.name}")
        except ToolError as err:
            raise McpServerUnavailable(config.name, str(err)) from None
        return {key: values[name] for key, name in config.secrets.items()}

    def expand(self, config: McpServerConfig, values: Mapping[str, str], where: str) -> dict[str, str]:
        """``values`` with each ``${secret:NAME}`` replaced from the vault and each ``${VAR}`` from
        the environment. Raises ``McpServerUnavailable`` naming the first variable that is not set
        or secret that cannot be read."""

        def one(key: str, value: str) -> str:
            def replace(match: re.Match[str]) -> str:
                secret, name = match.group(1), match.group(2)
                if secret is not None:
                    try:
                        return self._vault.resolve([secret], f"mcp:{config.name}")[secret]
                    except ToolError as err:
                        raise McpServerUnavailable(config.name, str(err)) from None
                if name not in self._env:
                    raise McpServerUnavailable(
                        config.name, f"the environment variable {name} (in {where}.{key}) is not set on this worker"
                    )
                return self._env[name]

            # One pass: a value read is never read again as a reference.
            return _REFERENCE.sub(replace, value)

        return {key: one(key, value) for key, value in values.items()}


def _host_path(value: str, cwd: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else cwd / path


def _environment_through_process(argv: list[str], unset: list[str]) -> list[str]:
    """The bwrap command line of ``sandboxed_argv`` with the sandboxed command taking bwrap's own
    environment (the process environment, readable only by this user) instead of ``--setenv``
    arguments any user can read in the process list; ``unset`` names are removed from it."""
    head = argv.index("--")
    options = [arg for arg in argv[1:head] if arg != "--clearenv"]
    assert "--setenv" not in options, "sandboxed_argv was given an environment to set"
    unsets = [arg for name in unset for arg in ("--unsetenv", name)]
    return [argv[0], *unsets, *options, *argv[head:]]
