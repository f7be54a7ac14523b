"""What a worker checks before it polls: a Temporal server that answers, and the search attributes its workflows write.

Containers start in any order, so a worker waits for its server (with backoff, saying so)
instead of exiting. A namespace without the search attributes sessions, tasks and graphs
upsert (``SEARCH_ATTRIBUTE_KEYS``: status, owner, kind, profile, pending approvals, spend)
fails their workflow tasks forever, so a worker registers missing ones when the server lets
it, and otherwise refuses to start with the commands that fix it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client, Plugin
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from agentrt.schemas import SEARCH_ATTRIBUTE_KEYS, ConfigurationError

__all__ = ["MissingSearchAttributes", "connect_when_ready", "ensure_search_attributes", "search_attribute_type_name"]

log = logging.getLogger("agentrt.worker")

# Statuses that mean "the server is not ready yet", not "the server says no".
_NOT_READY = {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED}

_TYPE_NAMES = {
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
}


def search_attribute_type_name(value: int) -> str:
    """The type as the ``temporal`` CLI spells it (``Keyword``, ``KeywordList``, ...)."""
    try:
        return _TYPE_NAMES[SearchAttributeIndexedValueType(value)]
    except ValueError:
        return f"type {value}"


class MissingSearchAttributes(ConfigurationError):
    """The namespace lacks search attributes sessions write (or has them with another type), and
    this worker could not register them. Fields: ``namespace``, ``address``, ``needed`` (name ->
    type agentrt needs, for each attribute at fault), ``mistyped`` (name -> type found, for those
    that exist with another type), ``reason`` (why registering failed) and ``commands`` (the
    ``temporal`` commands an operator runs to fix it)."""

    def __init__(self, namespace: str, address: str, needed: dict[str, str], mistyped: dict[str, str], reason: str) -> None:
        self.namespace = namespace
        self.address = address
        self.needed = needed
        self.mistyped = mistyped
        self.reason = reason
        self.commands = _fix_commands(namespace, address, needed, mistyped)
        listed = ", ".join(f"{name} ({kind})" for name, kind in needed.items())
        found = "".join(f"; {name} exists as {kind}" for name, kind in mistyped.items())
        lines = "\n".join(f"  {command}" for command in self.commands)
        super().__init__(
            f"namespace {namespace!r} at {address} lacks the search attributes agentrt sessions write: "
            f"{listed}{found}. {reason}. Until they exist every session's workflow task fails. "
            f"Ask an operator of the namespace to run:\n{lines}\nthen start the worker again."
        )

    @property
    def missing(self) -> list[str]:
        """Names that do not exist at all."""
        return [name for name in self.needed if name not in self.mistyped]


def _fix_commands(namespace: str, address: str, needed: dict[str, str], mistyped: dict[str, str]) -> list[str]:
    target = f"--address {address} --namespace {namespace}"
    commands = [f"temporal operator search-attribute remove {target} --name {name} --yes" for name in mistyped]
    # One create per attribute: `temporal` 1.9 registers only the first of several --name flags.
    commands += [f"temporal operator search-attribute create {target} --name {name} --type {kind}" for name, kind in needed.items()]
    return commands


def _short_reason(err: BaseException) -> str:
    """A connection error without the transport's nesting: ``connection refused`` where it says so."""
    text = str(err)
    if re.search(r"connection refused", text, re.IGNORECASE):
        return "connection refused"
    return text if len(text) <= 200 else text[:200] + "..."


async def connect_when_ready(
    address: str,
    namespace: str,
    plugins: Sequence[Plugin] = (),
    *,
    first_delay: float = 1.0,
    max_delay: float = 30.0,
    attempts: int | None = None,
    runtime: Runtime | None = None,
) -> Client:
    """``Client.connect`` that waits for the server: retries with exponential backoff
    (``first_delay`` doubling up to ``max_delay`` seconds), logging
    ``waiting for Temporal at HOST:PORT (attempt N, next in Xs): reason`` before each wait.

    ``attempts`` bounds the tries (None: until it answers or the task is cancelled); the last
    failure is raised as the SDK's ``RuntimeError``. ``runtime``: the Temporal runtime to connect
    with (``sdk_metrics_runtime``'s; None: the SDK's default).
    """
    attempt, delay = 1, first_delay
    while True:
        try:
            return await Client.connect(address, namespace=namespace, plugins=list(plugins), runtime=runtime)
        except RuntimeError as err:
            if attempts is not None and attempt >= attempts:
                raise
            log.warning("waiting for Temporal at %s (attempt %d, next in %gs): %s", address, attempt, delay, _short_reason(err))
        await asyncio.sleep(delay)
        attempt, delay = attempt + 1, min(max_delay, delay * 2)


async def _list_search_attributes(client: Client, address: str) -> dict[str, int]:
    """The namespace's custom search attributes (name -> indexed value type), waiting while the server is not ready."""
    delay = 1.0
    attempt = 1
    while True:
        try:
            response = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=client.namespace)
            )
            return dict(response.custom_attributes)
        except RPCError as err:
            if err.status not in _NOT_READY:
                raise ConfigurationError(
                    f"cannot read the search attributes of namespace {client.namespace!r} at {address}: "
                    f"{err.status.name if err.status else 'error'}: {err.message}"
                ) from err
            log.warning("waiting for Temporal at %s (attempt %d, next in %gs): %s", address, attempt, delay, err.message)
        await asyncio.sleep(delay)
        attempt, delay = attempt + 1, min(30.0, delay * 2)


async def ensure_search_attributes(
    client: Client, keys: Sequence[SearchAttributeKey] = SEARCH_ATTRIBUTE_KEYS, *, register: bool = True
) -> list[str]:
    """Make sure the client's namespace has ``keys`` (default: the ones sessions, tasks and graphs write).

    Missing ones are registered (``OperatorService.AddSearchAttributes``) when ``register``
    is true and the server allows it; returns the names registered (empty when all were
    there). Raises ``MissingSearchAttributes``, naming them and the ``temporal operator
    search-attribute create`` command, when one is missing and cannot be registered, or
    exists with another type (a type cannot be changed in place).
    """
    address = client.service_client.config.target_host
    namespace = client.namespace
    found = await _list_search_attributes(client, address)
    needed = {
        k.name: search_attribute_type_name(k.indexed_value_type)
        for k in keys
        if found.get(k.name) != int(k.indexed_value_type)
    }
    mistyped = {name: search_attribute_type_name(found[name]) for name in needed if name in found}
    if mistyped:
        raise MissingSearchAttributes(
            namespace, address, needed, mistyped, "A search attribute's type cannot be changed; it must be removed and created again"
        )
    if not needed:
        return []
    if not register:
        raise MissingSearchAttributes(namespace, address, needed, {}, "This worker was told not to register them")
    request = AddSearchAttributesRequest(
        namespace=namespace,
        search_attributes={
            k.name: IndexedValueType.ValueType(int(k.indexed_value_type)) for k in keys if k.name in needed
        },
    )
    try:
        await client.operator_service.add_search_attributes(request)
    except RPCError as err:
        status = err.status.name if err.status else "error"
        raise MissingSearchAttributes(
            namespace, address, needed, {}, f"Registering them was refused ({status}: {err.message})"
        ) from err
    log.info(
        "registered search attributes %s in namespace %r",
        ", ".join(f"{name} ({kind})" for name, kind in needed.items()),
        namespace,
    )
    return list(needed)
