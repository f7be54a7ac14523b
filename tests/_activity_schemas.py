"""The JSON Schemas of every activity's input and result, as the ``agentrt`` on the import path
defines them; and what two builds' schemas must keep so that each reads what the other sends.

Run as a script (``python tests/_activity_schemas.py DIRECTORY``) it prints them as JSON for the
``agentrt`` its ``PYTHONPATH`` gives (a previous release's tree, tests/e2e/test_activity_contracts.py),
with a scratch store in DIRECTORY: so both builds' schemas come from the same code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def activity_schemas(scratch: Path) -> dict[str, Any]:
    """``{"module": where agentrt.schemas was imported from, "activities": {name: {"input": [...],
    "output": schema}}}`` of every activity a worker of every role registers (``build_activities``)."""
    import agentrt.schemas
    from pydantic import TypeAdapter

    from agentrt.activities import build_activities
    from agentrt.activities.tools import default_registry
    from agentrt.store import Store
    from agentrt.worker import AgentrtConfig

    url = f"sqlite:///{scratch / 'schemas.db'}"
    store = Store.open(url)
    try:
        config = AgentrtConfig(database_url=url)
        found: dict[str, Any] = {}
        for fn in build_activities(config, store, default_registry(), "all"):
            definition = getattr(fn, "__temporal_activity_definition")
            output = definition.ret_type
            found[definition.name] = {
                "input": [TypeAdapter(t).json_schema() for t in definition.arg_types or []],
                "output": None if output in (None, type(None)) else TypeAdapter(output).json_schema(),
            }
    finally:
        store.close()
    return {"module": agentrt.schemas.__file__, "activities": found}


def _models(schema: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The object schemas in ``schema`` by name: its ``$defs``, and the top level as ``(top)``."""
    if not schema:
        return {}
    models = dict(schema.get("$defs", {}))
    if schema.get("type") == "object":
        models["(top)"] = schema
    return {name: model for name, model in models.items() if model.get("type") == "object" and "properties" in model}


def unreadable_changes(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What in ``current``'s activity inputs and results a build with ``previous``'s could not read, or
    the other way round: an activity gone, a field gone (the other build may send it: fields are
    forbidden unless known), a field required on one side only (the other may leave it out). A new
    optional field is allowed here; that it is left out of the payload at its default, so that the
    previous build reads it, is what running both builds shows."""
    problems = []
    for name, before in sorted(previous.items()):
        after = current.get(name)
        if after is None:
            problems.append(f"{name}: no longer registered")
            continue
        pairs = [("input", b, a) for b, a in zip(before["input"], after["input"])] + [
            ("output", before["output"], after["output"])
        ]
        if len(before["input"]) != len(after["input"]):
            problems.append(f"{name}: takes {len(after['input'])} arguments, was {len(before['input'])}")
        for side, old, new in pairs:
            old_models, new_models = _models(old), _models(new)
            for model in sorted(old_models.keys() & new_models.keys()):
                o, n = old_models[model], new_models[model]
                gone = sorted(set(o["properties"]) - set(n["properties"]))
                if gone:
                    problems.append(f"{name} {side} {model}: fields gone: {', '.join(gone)}")
                required = set(o.get("required", [])) ^ set(n.get("required", []))
                if required:
                    problems.append(f"{name} {side} {model}: required on one side only: {', '.join(sorted(required))}")
    return problems


if __name__ == "__main__":
    print(json.dumps(activity_schemas(Path(sys.argv[1]))))
