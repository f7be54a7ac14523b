"""The HTTP client an MCP server over HTTP is reached through, with every answer's body bounded
while it is read.

The MCP SDK reads a JSON answer whole (``response.aread()``) before it looks at it: a server
answering with 200 MiB grows the worker's memory by that much. The SDK takes the client it uses
(an ``httpx2.AsyncClient``, MCP's fork of httpx), so the bound sits in that client's transport:
a response body longer than the bound raises ``httpx2.StreamError`` as soon as the bytes read pass
it, which the SDK answers with an error to the request it belonged to (a typed ``McpToolError``
for a call). SSE answers are bounded per event by the SDK itself (``max_sse_event_size``, given
the same bound).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

__all__ = ["bounded_http_client"]


def bounded_http_client(headers: dict[str, str], limit: int) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` as ``create_mcp_http_client`` makes it (MCP's timeouts, ``headers``)
    whose non-SSE response bodies raise ``httpx2.StreamError`` past ``limit`` bytes."""
    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, transport=_BoundedTransport(httpx2.AsyncHTTPTransport(), limit))


class _BoundedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            response.stream = _BoundedStream(response.stream, self._limit)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                raise httpx2.StreamError(
                    f"the server's answer was longer than {self._limit:,} bytes, the most one message may hold; it was dropped"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
