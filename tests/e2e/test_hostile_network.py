"""A hostile model granted network against a real worker: its commands reach neither Temporal's
frontend, nor the HTTP API, nor the store's PostgreSQL on the worker host's loopback (from there it
could start a session with every privilege and read the worker's secrets); a destination the
operator allows is reached."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from agentrt.schemas import ApprovalPolicy
from tests._loopback_http import BODY, loopback_http
from tests.conftest import Harness
from tests.e2e._support import session_config, write_script

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
        script = write_script(tmp_path, [
            {"tool_calls": [{"name": "shell.run", "arguments": {"command": c}} for c in attacks]},
            {"text": "done"},
        ])
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
