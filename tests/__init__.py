"""agentrt package."""
