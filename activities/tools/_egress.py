"""The egress proxy: the one door from a sandbox with network to the world, shut on the worker's own host.

A sandboxed command always runs in a network namespace of its own (``bwrap --unshare-net``), so
it reaches no address of the host, the host's loopback services included: Temporal's frontend,
the gateway, the store's database, the codec server. Network a session is granted is an HTTP
proxy the worker runs for the length of one call (``EgressProxy``), on a Unix socket mounted into
the sandbox; a relay in the sandbox (``_egress_relay``) makes it ``127.0.0.1:PROXY_PORT`` there,
and the command gets ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``ALL_PROXY`` pointing at it.

The proxy takes ``CONNECT host:port`` (HTTPS and any TCP tunnel) and absolute-form HTTP requests
(``GET http://host/...``). It resolves the name itself and refuses (``403``, the reason in the
body) a destination any of whose addresses is loopback, link-local, private, shared
(100.64/10), multicast, reserved, unspecified, otherwise not globally routable, or one of the
worker host's own interface addresses, unless the operator's allow-list (``[sandbox] egress_allow`` in agentrt.toml) names
it: ``host:port`` by name, or ``address:port`` / ``network/prefix:port`` by address (port
``*``: any). It connects to the very address it checked, so a name that resolves again to
another address (DNS rebinding) changes nothing. UDP (DNS included), ICMP and raw sockets have
no door at all.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentrt.schemas import ConfigurationError

__all__ = [
    "EGRESS_SOCKET_NAME",
    "PROXY_PORT",
    "EgressProxy",
    "EgressRule",
    "egress_refusal",
    "parse_egress_allow",
]

# The port the relay listens on in the sandbox's own loopback (no other process of the host sees it).
PROXY_PORT = 3128
# The socket's name in the directory the proxy makes (mounted into the sandbox).
EGRESS_SOCKET_NAME = "egress.sock"
# Bounds: the request head a proxy reads (bytes), connections open at once in one call, seconds
# to read a head or to connect.
MAX_HEAD_BYTES = 16 * 1024
MAX_CONNECTIONS = 64
CONNECT_TIMEOUT_SECONDS = 10.0
_BUFFER = 65536
_SIOCGIFADDR = 0x8915
_IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# What ``socket.getaddrinfo`` answers: (family, type, proto, canonname, sockaddr) per address.
_Resolved = list[tuple[Any, Any, int, str, Any]]


@dataclass(frozen=True)
class EgressRule:
    """One entry of ``[sandbox] egress_allow``: a destination a sandboxed command may reach although
    it is internal. ``host`` is a lower-case name (matched against the name asked for) or None;
    ``network`` an address range (matched against the addresses the name resolves to) or None;
    ``port`` None for any."""

    host: str | None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    port: int | None

    def covers(self, host: str, port: int, address: _IP | None = None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host is not None:
            return host.lower().rstrip(".") == self.host
        return address is not None and self.network is not None and address in self.network


def parse_egress_allow(entries: Sequence[str]) -> tuple[EgressRule, ...]:
    """``[sandbox] egress_allow`` entries (``"host:port"``, ``"10.0.0.0/8:443"``,
    ``"[::1]:8080"``, ``"example.internal:*"``) as rules; raises ``ConfigurationError`` for one
    without a port or with a bad one."""
    rules = []
    for entry in entries:
        if not isinstance(entry, str) or ":" not in entry:
            raise ConfigurationError(f"[sandbox] egress_allow: {entry!r} is not HOST:PORT (PORT a number or *)")
        host, _, port_text = entry.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if port_text == "*":
            port = None
        elif port_text.isdigit() and 0 < int(port_text) < 65536:
            port = int(port_text)
        else:
            raise ConfigurationError(f"[sandbox] egress_allow: {entry!r} has no valid port (1 to 65535, or *)")
        if not host:
            raise ConfigurationError(f"[sandbox] egress_allow: {entry!r} names no host")
        try:
            rules.append(EgressRule(None, ipaddress.ip_network(host, strict=False), port))
        except ValueError:
            rules.append(EgressRule(host.lower().rstrip("."), None, port))
    return tuple(rules)


def _own_addresses() -> set[_IP]:
    """The addresses of this host's interfaces: IPv4 by ``SIOCGIFADDR``, IPv6 from ``/proc/net/if_inet6``."""
    found: set[_IP] = set()
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            with contextlib.suppress(OSError):
                found.add(ipaddress.IPv4Address(fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)[20:24]))
    with contextlib.suppress(OSError), open("/proc/net/if_inet6") as table:
        for line in table:
            with contextlib.suppress(ValueError, IndexError):
                found.add(ipaddress.IPv6Address(int(line.split()[0], 16)))
    return found


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to (mapped, 6to4, NAT64, Teredo's client), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.teredo[1] if address.teredo is not None else None


def _internal(address: _IP, own: set[_IP]) -> str | None:
    """Why ``address`` is inside the worker's host or network, or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = _embedded_ipv4(address)
        why = _internal(carried, own) if carried is not None else None
        if why is not None:
            return f"{why} (carried in {address})"
    checks = (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared (carrier-grade NAT)", isinstance(address, ipaddress.IPv4Address) and address in _SHARED),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("one of the worker host's own", address in own),
        ("not globally routable", not address.is_global),  # documentation, benchmarking, 6to4/NAT64 relays ...
    )
    return next((f"{what} address" for what, hit in checks if hit), None)


def egress_refusal(
    host: str, port: int, rules: Sequence[EgressRule], own: set[_IP] | None = None
) -> tuple[str | None, _Resolved]:
    """Whether a sandboxed command may reach ``host:port``: ``(None, addresses)`` to connect to, in
    the order ``getaddrinfo`` gave them, or ``(reason, [])``. A name the allow-list names is
    allowed whatever it resolves to; otherwise every address must be public or covered by an
    address rule (one internal address refuses the destination). ``own``: the host's addresses
    (default: read now)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        return f"{host} does not resolve: {err}", []
    if not found:
        return f"{host} does not resolve", []
    if any(rule.covers(host, port) for rule in rules):
        return None, found
    own = _own_addresses() if own is None else own
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        why = _internal(address, own)
        if why is not None and not any(rule.covers(host, port, address) for rule in rules):
            return (
                f"{host}:{port} is refused: {address} is a {why}; sandboxed commands reach only public "
                "addresses unless the operator allows a destination ([sandbox] egress_allow)"
            ), []
    return None, found


class EgressProxy:
    """The proxy of one call: ``start()`` makes a directory holding ``EGRESS_SOCKET_NAME`` and
    serves it on a thread until ``close()``, which also ends every connection. ``rules`` are the
    operator's allow-list (``parse_egress_allow``). ``refused`` counts the destinations refused."""

    def __init__(self, rules: Sequence[EgressRule] = ()) -> None:
        self._rules = tuple(rules)
        self._own = _own_addresses()
        self._dir: str | None = None
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.refused: list[str] = []

    @property
    def directory(self) -> str:
        if self._dir is None:
            raise RuntimeError("the egress proxy is not started")
        return self._dir

    def start(self) -> str:
        """Listen; the directory to mount into the sandbox. Raises ``OSError`` when the socket cannot be made."""
        self._dir = tempfile.mkdtemp(prefix="agentrt-egress-")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(os.path.join(self._dir, EGRESS_SOCKET_NAME))
            listener.listen(MAX_CONNECTIONS)
        except OSError:
            listener.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._listener = listener
        threading.Thread(target=self._accept, name="agentrt-egress", daemon=True).start()
        return self._dir

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            open_sockets = list(self._sockets) + ([self._listener] if self._listener else [])
            self._sockets.clear()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "EgressProxy":
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _held(self, sock: socket.socket) -> Iterator[socket.socket]:
        with self._lock:
            if self._closed.is_set():
                sock.close()
                raise OSError("the egress proxy is closed")
            self._sockets.add(sock)
        try:
            yield sock
        finally:
            with self._lock:
                self._sockets.discard(sock)
            sock.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                busy = len(self._sockets) >= 2 * MAX_CONNECTIONS
            if busy:
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), name="agentrt-egress-conn", daemon=True).start()

    def _serve(self, client_socket: socket.socket) -> None:
        with contextlib.suppress(OSError), self._held(client_socket) as client:
            client.settimeout(CONNECT_TIMEOUT_SECONDS)
            head, rest = _read_head(client)
            if head is None:
                return _answer(client, 400, "the request head is malformed or over 16 KiB")
            method, target, version, lines = head
            if method == "CONNECT":
                host, port = _split_host_port(target, 443)
                forward = b""
            elif target.lower().startswith("http://"):
                authority, _, path = target[7:].partition("/")
                host, port = _split_host_port(authority, 80)
                forward = f"{method} /{path} {version}\r\n".encode() + b"".join(line + b"\r\n" for line in lines) + b"\r\n" + rest
            else:
                return _answer(client, 400, "send CONNECT host:port or an absolute http:// URL (this is a proxy)")
            if host is None:
                return _answer(client, 400, f"no host:port in {target[:200]!r}")
            why, addresses = egress_refusal(host, port, self._rules, self._own)
            if why is not None:
                self.refused.append(f"{host}:{port}")
                return _answer(client, 403, why)
            upstream = _connect(addresses)
            if upstream is None:
                return _answer(client, 502, f"{host}:{port} does not answer")
            with self._held(upstream):
                if method == "CONNECT":
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    upstream.sendall(rest)
                else:
                    upstream.sendall(forward)
                client.settimeout(None)
                _splice(client, upstream)


def _read_head(sock: socket.socket) -> tuple[tuple[str, str, str, list[bytes]] | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk or len(data) + len(chunk) > MAX_HEAD_BYTES:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    first, *lines = head.split(b"\r\n")
    parts = first.decode("latin-1").split(" ")
    if len(parts) != 3:
        return None, b""
    return (parts[0].upper(), parts[1], parts[2], lines), rest


def _split_host_port(authority: str, default: int) -> tuple[str | None, int]:
    authority = authority.rsplit("@", 1)[-1]
    if authority.startswith("["):
        host, _, tail = authority[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port_text = authority.partition(":")
    if port_text and not (port_text.isdigit() and 0 < int(port_text) < 65536):
        return None, 0
    return (host or None), int(port_text) if port_text else default


def _connect(addresses: _Resolved) -> socket.socket | None:
    for family, kind, proto, _, sockaddr in addresses:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(CONNECT_TIMEOUT_SECONDS)
        try:
            sock.connect(sockaddr)
        except OSError:
            sock.close()
            continue
        sock.settimeout(None)
        return sock
    return None


def _answer(client: socket.socket, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = f"agentrt egress proxy: {text}\n".encode()
    client.sendall(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
    )


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(_BUFFER):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides are done (``close()`` shuts both sockets down, which ends it)."""
    back = threading.Thread(target=_pump, args=(b, a), name="agentrt-egress-pump", daemon=True)
    back.start()
    _pump(a, b)
    back.join()
