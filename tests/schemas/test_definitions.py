"""Every schema model is complete where it is defined: no forward reference waits for a
module that imports this one, and nothing patches models up afterwards (``model_rebuild``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Runs in a fresh interpreter and records each model as pydantic finishes building its class,
# before any later import or validation could complete it.
MODELS_INCOMPLETE_AT_DEFINITION = """
import json
from pydantic import BaseModel

incomplete = []

def record(cls, **kwargs):
    if cls.__module__.startswith("agentrt.") and not cls.__pydantic_complete__:
        incomplete.append(f"{cls.__module__}.{cls.__qualname__}")

BaseModel.__pydantic_init_subclass__ = classmethod(record)
import agentrt.schemas
print(json.dumps(incomplete))
"""


def test_every_schema_model_is_complete_when_its_class_is_defined() -> None:
    result = subprocess.run(
        [sys.executable, "-c", MODELS_INCOMPLETE_AT_DEFINITION],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
