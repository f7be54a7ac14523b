"""The public client side of agentrt: ``AgentClient`` for services and the ``agentrt`` CLI."""

from client._client import AgentClient, SessionListing, StartedSession, default_principal
from client._connection import connect

__all__ = ["AgentClient", "SessionListing", "StartedSession", "connect", "default_principal"]
