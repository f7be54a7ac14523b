"""``send_and_wait``: a message and its turn's outcome in one update, and ``start_and_wait``:
a session's start, first message and outcome in one call (update-with-start)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from agentrt.schemas import RequestRejected, SendMessageInput, TurnEnded, TurnOutcome, SessionNotFound