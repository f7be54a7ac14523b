"""service.py MESSAGE: the shop's backend asks the support agent and prints the Triage it gets."""

import asyncio
import os
import sys

from agentrt.client import AgentClient
from agentrt.worker import AgentrtConfig
from support_agent import Triage


async def triage(message: str) -> Triage:
    config = AgentrtConfig.load()  # agentrt.toml and AGENTRT_* as the worker reads them
    client = await AgentClient.connect(config, principal="shop-backend")
    session = client.new_config(".", agent="support", profile="scripted", script="script.yaml")  # or profile="claude", no script
    started = await client.start(session, message)
    print(f"session {started.session_id}: approve its refund as shop-backend (agentrt session state lists it)", file=sys.stderr)
    outcome = await client.wait(started.session_id, started.turn_id)  # until the turn ends
    if outcome.status != "completed":
        raise RuntimeError(f"session {started.session_id} ended {outcome.status}: {outcome.error}")
    return outcome.output_as(Triage)  # the validated answer, typed


print(asyncio.run(triage(sys.argv[1])).model_dump_json(indent=2))
sys.stdout.flush()
os._exit(0)  # skip CPython finalization (see the README)
