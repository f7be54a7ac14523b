"""Where the Temporal UI of a server is, so the CLI prints a URL that works.

An embedded server knows its own UI. For a server found running, the CLI asks two places:
the note an ``agentrt dev`` leaves in ``$AGENTRT_HOME`` while it runs (its address, UI and
process id, one file per frontend port), then a Temporal UI answering at the frontend port
+ 1000 on a loopback address, where ``temporal server start-dev`` puts it by default. For
any other server the UI is not known, and the CLI says so instead of guessing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from agentrt.store import agentrt_home
from agentrt.worker import free_port, port_is_open

__all__ = ["DEV_NOTE_PREFIX", "dev_note", "noted_dev_server", "ui_port_for", "ui_url_of"]

DEV_NOTE_PREFIX = "dev-server-"
# The temporal CLI's default UI port is the frontend port + this.
UI_PORT_OFFSET = 1000
PROBE_TIMEOUT_SECONDS = 1.0


def _host_port(address: str) -> tuple[str, int] | None:
    host, _, port = address.rpartition(":")
    try:
        return (host.removeprefix("[").removesuffix("]") or "localhost"), int(port)
    except ValueError:
        return None


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ui_port_for(frontend_port: int, host: str = "127.0.0.1") -> int:
    """The UI port for a dev server on ``frontend_port``: that + 1000, as ``temporal server
    start-dev`` does, unless it is taken or past 65535; then a free one."""
    port = frontend_port + UI_PORT_OFFSET
    return port if port <= 65535 and not port_is_open(host, port) else free_port(host)


def dev_note(port: int, home: Path | None = None) -> Path:
    """The file an ``agentrt dev`` serving frontend ``port`` keeps in ``home`` (``$AGENTRT_HOME``)."""
    return (home or agentrt_home()) / f"{DEV_NOTE_PREFIX}{port}.json"


@contextlib.contextmanager
def noted_dev_server(port: int, address: str, ui_url: str | None) -> Iterator[Path]:
    """Keep a note of this process's dev server (frontend ``port``, ``address``, ``ui_url``) in
    ``$AGENTRT_HOME`` while inside; removed on the way out unless another process wrote it since."""
    path = dev_note(port)
    path.parent.mkdir(parents=True, exist_ok=True)
    note = {"address": address, "ui_url": ui_url, "pid": os.getpid()}
    path.write_text(json.dumps(note))
    try:
        yield path
    finally:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _noted_ui(port: int) -> str | None:
    try:
        note = json.loads(dev_note(port).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or not _alive(note.get("pid")):
        return None
    ui_url = note.get("ui_url")
    return ui_url if isinstance(ui_url, str) and ui_url else None


def _temporal_ui_answers(url: str) -> bool:
    """A Temporal UI answers at ``url``: its ``/api/v1/settings`` is JSON with ``Auth`` and ``Version``."""
    try:
        with urllib.request.urlopen(f"{url}/api/v1/settings", timeout=PROBE_TIMEOUT_SECONDS) as response:
            settings = json.loads(response.read(65536))
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(settings, dict) and {"Auth", "Version"} <= set(settings)


def ui_url_of(address: str) -> str | None:
    """The Temporal UI of the server at ``address`` (``host:port``), when it can be known: from the
    note of the running ``agentrt dev`` that serves it, else a Temporal UI answering at the port
    + 1000 of a loopback address; None otherwise. Blocks for at most ``PROBE_TIMEOUT_SECONDS``."""
    parts = _host_port(address)
    if parts is None or not _loopback(parts[0]):
        return None
    port = parts[1]
    noted = _noted_ui(port)
    if noted is not None:
        return noted
    guess = f"http://localhost:{port + UI_PORT_OFFSET}"
    return guess if port + UI_PORT_OFFSET <= 65535 and _temporal_ui_answers(guess) else None
