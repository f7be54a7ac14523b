"""A hostile model against a real worker's sandbox. Granted network, its commands reach neither
Temporal's frontend, nor the HTTP API, nor the store's PostgreSQL on the worker host's loopback
(from there it could start a session with every privilege and read the worker's secrets); a
destination the operator allows is reached. Its grabs at the host's disk, memory and kernel
keyrings are refused, and the worker serves on."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from agentrt.schemas import ApprovalPolicy
from tests._loopback_http import BODY, loopback_http
from tests.conftest import Harness
from tests.e2e._support import session_config, shell_round_script

AUTO = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow", destructive="allow", network="allow")
REACHED = BODY.decode().strip()
SOCKET_PROBE = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2); print(\"CONNECTED\")'"


async def test_a_hostile_model_granted_network_reaches_no_loopback_service_of_the_worker_host(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    temporal_port = int(harness.server.address.rsplit(":", 1)[1])
    with loopback_http() as gateway_port, loopback_http() as allowed_port:
        config = dataclasses.replace(
            harness.config, task_queue=f"tq-{uuid.uuid4().hex[:8]}", egress_allow=[f"127.0.0.1:{allowed_port}"]
        )
        operator_allows = Harness(harness.temporal, config.task_queue, config, harness.store, harness.server)
        attacks = [
            f"curl -sS -m 5 http://127.0.0.1:{temporal_port}/",
            SOCKET_PROBE.format(port=temporal_port),
            f"curl -sS -m 5 http://127.0.0.1:{gateway_port}/v1/sessions",
            f"curl -sS -m 5 --noproxy '*' http://127.0.0.1:{gateway_port}/v1/sessions",
            f"curl -sS -m 5 http://localhost:5432/",
            SOCKET_PROBE.format(port=5432),
            f"curl -sS -m 5 http://127.0.0.1:{allowed_port}/",
        ]
        script = shell_round_script(tmp_path, attacks)
        sid = operator_allows.new_session_id()
        async with operator_allows.worker():
            client = operator_allows.client
            started = await client.start(session_config(client, sid, workspace, script, approval=AUTO, network=True), "attack")
            outcome = await client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    texts = [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]
    temporal_curl, temporal_socket, gateway, gateway_direct, postgres_curl, postgres_socket, allowed = texts
    for refused in (temporal_curl, gateway, postgres_curl):
        assert "loopback address" in refused and REACHED not in refused
    for direct in (temporal_socket, postgres_socket):
        assert "CONNECTED" not in direct and "Connection refused" in direct
    assert "Failed to connect" in gateway_direct and REACHED not in gateway_direct
    assert REACHED in allowed


KEYCTL = "python3 -c 'import ctypes; libc = ctypes.CDLL(None, use_errno=True); print(\"keyctl\", libc.syscall(250, 0, -3, 0, 0), ctypes.get_errno())'"


async def test_a_hostile_model_s_disk_memory_and_keyring_grabs_are_refused_and_the_worker_serves_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    attacks = [
        "touch big; fallocate --keep-size -l 16G big; du -k big",
        "python3 -c 'x = bytearray(6 * 1024**3)'",
        KEYCTL,
        "echo still-serving",
    ]
    script = shell_round_script(tmp_path, attacks)
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=AUTO), "attack")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    disk, memory, keyring, after = [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert "unsupported" in disk and "0\tbig" in disk
    assert "MemoryError" in memory
    assert "keyctl -1 1" in keyring  # EPERM
    assert "still-serving" in after
