"""Deterministic validation of tool-call arguments against a tool's JSON Schema (used inside workflows)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jsonschema

from agentrt.schemas._messages import ToolSpec


def argument_problems(spec: ToolSpec, arguments: dict[str, Any]) -> list[str]:
    """Return readable problems (``"path: 'path' is a required property"``); empty when valid.

    Validation follows JSON Schema draft 2020-12 (jsonschema's ``Draft202012Validator``).
    """
    validator = jsonschema.Draft202012Validator(spec.parameters)
    problems = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(map(str, e.path))):
        where = "/".join(str(p) for p in error.path) or "(arguments)"
        problems.append(f"{where}: {error.message}")
    return problems


def arguments_sha256(arguments: dict[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON (sorted keys, no spaces) of ``arguments``."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
