"""The ``[quotas]`` and ``[tenants]`` tables of agentrt.toml, read into one ``QuotaPolicy``.

``[tenants]`` maps an owner to its tenant (``alice = "acme"``); ``[quotas]`` holds the default
limits of every tenant and ``[quotas.tenants.NAME]`` a tenant's own (its fields replace the
default's)::

    [tenants]
    alice = "acme"

    [quotas]
    tokens_per_day = 2000000

    [quotas.tenants.acme]
    concurrent_sessions = 20
    cost_usd_per_day = 50.0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentrt.schemas import QUOTA_NAMES, ConfigurationError, Quota, QuotaPolicy


def quota_policy(quotas: object, tenants: object, file: Path | None) -> QuotaPolicy:
    """The ``QuotaPolicy`` of ``[quotas]`` and ``[tenants]``; raises ``ConfigurationError`` naming the
    table and the setting for an unknown key, a wrong type or a negative limit."""
    if not isinstance(quotas, dict):
        raise ConfigurationError(f"{file}: quotas must be a table ([quotas]), not {quotas!r}")
    if not isinstance(tenants, dict) or not all(isinstance(v, str) for v in tenants.values()):
        raise ConfigurationError(f"{file}: [tenants] maps owner names to tenant names (alice = \"acme\"), not {tenants!r}")
    own = quotas.get("tenants", {})
    if not isinstance(own, dict) or not all(isinstance(v, dict) for v in own.values()):
        raise ConfigurationError(f"{file}: [quotas.tenants.NAME] are tables of limits, not {own!r}")
    default = _quota({k: v for k, v in quotas.items() if k != "tenants"}, "[quotas]", file)
    per_tenant = {name: _quota(raw, f"[quotas.tenants.{name}]", file) for name, raw in own.items()}
    try:
        return QuotaPolicy(default=default, tenants=per_tenant, owners=dict(tenants))
    except ValidationError as err:
        raise ConfigurationError(f"{file}: {err.errors()[0]['msg']}") from err


def _quota(raw: dict[str, Any], where: str, file: Path | None) -> Quota:
    unknown = sorted(set(raw) - set(QUOTA_NAMES))
    if unknown:
        raise ConfigurationError(f"{file}: {where} has unknown setting(s) {', '.join(unknown)}; known: {', '.join(QUOTA_NAMES)}")
    try:
        return Quota.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
        raise ConfigurationError(f"{file}: {where} is invalid: {problems}") from err
