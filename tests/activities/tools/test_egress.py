"""The egress proxy: what a sandboxed command granted network reaches (public addresses and what the
operator allows) and what it never does (the worker host's loopback services, its own addresses,
private and link-local ranges), tried with curl and raw sockets from inside the sandbox."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

from agentrt.activities.tools import EgressProxy, ToolContext, egress_refusal, parse_egress_allow
from agentrt.activities.tools._egress import EGRESS_SOCKET_NAME, _own_addresses
from agentrt.schemas import ConfigurationError, ToolCall
from tests._loopback_http import BODY, loopback_http

REACHED = BODY.decode().strip()


def shell(registry, ctx: ToolContext, command: str) -> str:
    return registry.execute(ToolCall(id="c1", name="shell.run", arguments={"command": command}), ctx).text


def _public(host: str, port: int) -> list:
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, port))]


# -- the destination check ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("localhost", "loopback"),
        ("2130706433", "loopback"),  # 127.0.0.1 written as one number
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
        ("0.0.0.0", "unspecified"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("100.64.0.1", "shared"),
    ],
)
def test_internal_destinations_are_refused(host: str, why: str) -> None:
    reason, addresses = egress_refusal(host, 7233, ())

    assert reason is not None and why in reason and addresses == []
    assert "[sandbox] egress_allow" in reason


def test_an_address_of_the_worker_host_itself_is_refused_even_when_public() -> None:
    own = {ipaddress.ip_address("203.0.113.7"), ipaddress.ip_address("8.8.4.4")}

    reason, _ = egress_refusal("8.8.4.4", 443, (), own)

    assert reason is not None and "worker host's own" in reason


def test_the_host_s_interface_addresses_are_known() -> None:
    assert ipaddress.ip_address("127.0.0.1") in _own_addresses()


def test_a_public_address_is_allowed() -> None:
    reason, addresses = egress_refusal("8.8.8.8", 443, (), set())

    assert reason is None and addresses[0][4][0] == "8.8.8.8"


def test_an_operator_rule_allows_an_internal_destination_on_its_port_only() -> None:
    rules = parse_egress_allow(["127.0.0.1:18080", "10.0.0.0/8:*", "Registry.Internal:443"])

    assert egress_refusal("127.0.0.1", 18080, rules)[0] is None
    assert egress_refusal("127.0.0.1", 7233, rules)[0] is not None
    assert egress_refusal("10.9.8.7", 5432, rules)[0] is None
    assert rules[2].covers("registry.internal.", 443) and not rules[2].covers("registry.internal", 80)


@pytest.mark.parametrize("entry", ["127.0.0.1", "host:0", "host:70000", ":443", "host:https"])
def test_an_allow_list_entry_without_a_valid_port_is_a_configuration_error(entry: str) -> None:
    with pytest.raises(ConfigurationError, match="egress_allow"):
        parse_egress_allow([entry])


# -- the proxy itself --------------------------------------------------------------------------


def _ask(proxy: EgressProxy, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(Path(proxy.directory) / EGRESS_SOCKET_NAME))
        client.sendall(request)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
        return answer


def test_the_proxy_relays_an_allowed_request_and_refuses_a_host_service() -> None:
    with loopback_http() as allowed_port, loopback_http() as host_port:
        with EgressProxy(parse_egress_allow([f"127.0.0.1:{allowed_port}"])) as proxy:
            get = f"GET http://127.0.0.1:{allowed_port}/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            relayed = _ask(proxy, get.encode())
            refused = _ask(proxy, f"CONNECT 127.0.0.1:{host_port} HTTP/1.1\r\n\r\n".encode())

    assert relayed.startswith(b"HTTP/1.0 200") and relayed.endswith(BODY)
    assert refused.startswith(b"HTTP/1.1 403") and b"loopback address" in refused
    assert proxy.refused == [f"127.0.0.1:{host_port}"]
    assert not Path(proxy.directory).exists()  # its socket is gone with the call


def test_the_proxy_refuses_a_request_that_is_not_a_proxy_request() -> None:
    with EgressProxy() as proxy:
        answer = _ask(proxy, b"GET / HTTP/1.1\r\nHost: 127.0.0.1:7233\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 400")


def test_a_request_head_past_the_bound_is_refused_unread() -> None:
    with EgressProxy() as proxy:
        answer = _ask(proxy, b"GET http://example.com/ HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 400")


# -- from inside the sandbox -------------------------------------------------------------------


def test_granted_network_reaches_no_host_loopback_service_but_an_allowed_destination(registry, workspace: Path) -> None:
    host_address = next(str(a) for a in _own_addresses() if not a.is_loopback and a.version == 4)
    with loopback_http() as service, loopback_http() as allowed:
        ctx = ToolContext(workspace=workspace, network=True, egress_allow=(f"127.0.0.1:{allowed}",))
        through_proxy = shell(registry, ctx, f"curl -sS -m 5 http://127.0.0.1:{service}/")
        by_name = shell(registry, ctx, f"curl -sS -m 5 http://localhost:{service}/")
        host_ip = shell(registry, ctx, f"curl -sS -m 5 http://{host_address}:{service}/")
        no_proxy = shell(registry, ctx, f"curl -sS -m 5 --noproxy '*' http://127.0.0.1:{service}/")
        raw = shell(
            registry, ctx,
            f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {service}), timeout=2); print(\"CONNECTED\")'",
        )
        reached = shell(registry, ctx, f"curl -sS -m 5 http://127.0.0.1:{allowed}/")
        tunnelled = shell(registry, ctx, f"curl -sS -m 5 --proxytunnel http://127.0.0.1:{allowed}/")  # CONNECT, as HTTPS does

    for refused in (through_proxy, by_name):
        assert "403" in refused or "loopback address" in refused
        assert REACHED not in refused
    assert REACHED not in host_ip and ("worker host's own" in host_ip or "private" in host_ip)
    assert REACHED not in no_proxy and "Failed to connect" in no_proxy
    assert "CONNECTED" not in raw and "Connection refused" in raw
    assert REACHED in reached and REACHED in tunnelled


def test_without_network_not_even_the_proxy_is_there(registry, workspace: Path) -> None:
    out = shell(registry, ToolContext(workspace=workspace), "env | grep -ci _proxy; ls /run/agentrt-egress")

    assert "No such file or directory" in out
    assert out.split("--- stdout ---\n")[1].startswith("0\n")


def test_the_host_s_abstract_unix_sockets_are_out_of_reach_even_with_network(registry, workspace: Path) -> None:
    # Abstract sockets (D-Bus, container runtimes) belong to a network namespace, not to a path.
    name = f"agentrt-probe-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as host_service:
        host_service.bind("\0" + name)
        host_service.listen(1)
        probe = (
            "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect(\"\\0{name}\"); print(\"CONNECTED\")'"
        )
        out = shell(registry, ToolContext(workspace=workspace, network=True), probe)

    assert "CONNECTED" not in out and "Connection refused" in out
