"""The one connection factory: client and worker share the data converter and interceptors."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter


async def connect(address: str, namespace: str = "default") -> Client:
    """Connect to the Temporal frontend at ``address`` (``host:port``) with the pydantic data converter.

    Raises ``RuntimeError`` from the SDK when nothing answers at ``address``.
    """
    return await Client.connect(address, namespace=namespace, data_converter=pydantic_data_converter)
