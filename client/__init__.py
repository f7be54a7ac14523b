"""The public client side of agentrt: ``AgentClient`` for services and the ``agentrt`` CLI."""

from agentrt.client._client import AgentClient, SessionListing, StartedSession, default_principal
from agentrt.client._connection import connect
from agentrt.worker import AgentrtPlugin, build_data_converter

__all__ = [
    "AgentClient",
    "AgentrtPlugin",
    "SessionListing",
    "StartedSession",
    "build_data_converter",
    "connect",
    "default_principal",
]
