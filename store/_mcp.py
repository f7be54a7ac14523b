"""MCP servers' connection events (per worker process), the tool listings turns offered, and
operators' trust decisions on servers and the servers they added or changed at run time (each
in the audit log too)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection

from sqlalchemy import Connection, RowMapping, func, insert, select

from agentrt.schemas import (
    McpServerChange,
    McpServerConfig,
    McpServerEvent,
    McpServerExists,
    McpServerNotFound,
    McpTrustDecision,
    ToolSpec,
)
from agentrt.store._audit import AuditTable
from agentrt.store._base import text_column, utc
from agentrt.store._models import mcp_server_changes, mcp_server_events, mcp_trust_decisions, tool_listings

# Rows of mcp_server_events kept per server: older ones are pruned as new ones come.
MAX_SERVER_EVENTS_PER_SERVER = 1000


def listing_digest(specs: list[ToolSpec]) -> str:
    """The SHA-256 (hex) of ``specs``' compact JSON as stored: the key of a tool listing."""
    return _digest(_compact(specs))


def _compact(specs: list[ToolSpec]) -> str:
    # Keys keep their order: a schema's properties reach the model in the server's order.
    return json.dumps([s.model_dump(mode="json") for s in specs], separators=(",", ":"))


def _digest(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


class McpTables(AuditTable):
    """Tables ``mcp_server_events``, ``tool_listings``, ``mcp_trust_decisions`` and ``mcp_server_changes``."""

    def record_mcp_server_event(self, event: McpServerEvent, *, conn: Connection | None = None) -> None:
        """Append one server event; keeps the latest ``MAX_SERVER_EVENTS_PER_SERVER`` per server."""
        c = mcp_server_events.c
        with self._writing(conn) as conn:
            conn.execute(
                mcp_server_events.insert().values(
                    server=event.server, worker=event.worker, type=event.type, tools=event.tools,
                    diagnostic=text_column(event.diagnostic) if event.diagnostic is not None else None,
                    protocol_version=event.protocol_version, at=event.at,
                )
            )
            cutoff = conn.execute(
                select(c.id).where(c.server == event.server).order_by(c.id.desc())
                .offset(MAX_SERVER_EVENTS_PER_SERVER).limit(1)
            ).scalar()
            if cutoff is not None:
                conn.execute(mcp_server_events.delete().where(c.server == event.server, c.id <= cutoff))

    def mcp_server_events(self, server: str | None = None, limit: int = 100) -> list[McpServerEvent]:
        """The latest ``limit`` events (of ``server``, or of every server), oldest first."""
        c = mcp_server_events.c
        query = select(mcp_server_events).order_by(c.id.desc()).limit(limit)
        if server is not None:
            query = query.where(c.server == server)
        with self._engine.connect() as conn:
            rows = list(conn.execute(query).mappings())
        return [_event(row) for row in reversed(rows)]

    def latest_mcp_server_events(self) -> dict[str, McpServerEvent]:
        """Server name → its latest event (whichever worker wrote it)."""
        c = mcp_server_events.c
        latest = select(func.max(c.id)).group_by(c.server)
        with self._engine.connect() as conn:
            rows = conn.execute(select(mcp_server_events).where(c.id.in_(latest))).mappings()
            return {row["server"]: _event(row) for row in rows}

    def put_tool_listing(self, specs: list[ToolSpec], *, conn: Connection | None = None) -> str:
        """Keep ``specs`` under their digest (idempotent) and return the digest."""
        data = _compact(specs)
        digest = _digest(data)
        with self._writing(conn) as conn:
            conn.execute(
                self._insert_ignore(tool_listings, ["digest"]),
                {"digest": digest, "specs": text_column(data), "created_at": self._now()},
            )
        return digest

    def tool_listing(self, digest: str, *, conn: Connection | None = None) -> list[ToolSpec] | None:
        """The specs stored under ``digest``; None when there are none."""
        with self._reading(conn) as conn:
            data = conn.execute(select(tool_listings.c.specs).where(tool_listings.c.digest == digest)).scalar()
        if data is None:
            return None
        return [ToolSpec.model_validate(item) for item in json.loads(data)]


    def decide_mcp_trust(self, server: str, trust: str, principal: str, reason: str) -> McpTrustDecision:
        """Record that ``principal`` set how far MCP server ``server`` is trusted (``trusted``,
        ``untrusted`` or ``revoked``) because of ``reason``, with an audit row (action
        ``trust_mcp_server``, or ``revoke_mcp_server``), in one transaction; the latest decision
        holds. Raises ``ValueError`` (pydantic's) for a server name that is not
        ``SERVER_NAME_PATTERN``, another ``trust`` or an empty reason."""
        if not reason.strip():
            raise ValueError("a trust decision needs a reason")
        decision = McpTrustDecision(server=server, trust=trust, principal=principal, reason=reason, at=self._now())  # type: ignore[arg-type]
        with self.transaction() as conn:
            row = conn.execute(insert(mcp_trust_decisions).values(
                server=server, trust=trust, principal=principal, reason=reason, created_at=decision.at,
            ))
            decision_id = row.inserted_primary_key[0] if row.inserted_primary_key is not None else decision.at.isoformat()
            self.record_act(
                principal, "revoke_mcp_server" if trust == "revoked" else "trust_mcp_server", "mcp_server", server,
                reason=reason, detail={"trust": trust},
                key=f"mcp_server:{server}:trust:{decision_id}", at=decision.at, conn=conn,
            )
        return decision

    def mcp_trust(self, server: str) -> McpTrustDecision | None:
        """The latest trust decision on ``server``, or None when no operator decided (its
        agentrt.toml ``trust`` holds)."""
        c = mcp_trust_decisions.c
        with self._engine.connect() as conn:
            row = conn.execute(
                select(mcp_trust_decisions).where(c.server == server).order_by(c.id.desc()).limit(1)
            ).mappings().first()
        return None if row is None else _decision(row)

    def mcp_trust_decisions(self) -> dict[str, McpTrustDecision]:
        """Server name → the latest trust decision on it, for every server an operator decided on."""
        c = mcp_trust_decisions.c
        latest = select(func.max(c.id)).group_by(c.server)
        with self._engine.connect() as conn:
            rows = conn.execute(select(mcp_trust_decisions).where(c.id.in_(latest))).mappings()
            return {row["server"]: _decision(row) for row in rows}

    def change_mcp_server(
        self, action: str, config: McpServerConfig, principal: str, reason: str, configured: Collection[str] = ()
    ) -> McpServerChange:
        """Record that ``principal`` added (``action`` ``add``) or changed (``change``) MCP server
        ``config.name`` to ``config`` because of ``reason``, with an audit row (``add_mcp_server``,
        ``change_mcp_server``), in one transaction; the latest change of a server is its
        configuration. ``configured``: the servers of the caller's agentrt.toml, by name.

        Raises ``McpServerExists`` (an ``add`` of a name in ``configured`` or in the store),
        ``McpServerNotFound`` (a ``change`` of a name in neither), ``ValueError`` (an empty reason,
        another ``action``). Nothing is recorded then."""
        if not reason.strip():
            raise ValueError("a change of an MCP server needs a reason")
        name = config.name
        change = McpServerChange(server=name, action=action, config=config, principal=principal, reason=reason, at=self._now())  # type: ignore[arg-type]
        c = mcp_server_changes.c
        with self.transaction() as conn:
            stored = conn.execute(select(func.count()).select_from(mcp_server_changes).where(c.server == name)).scalar() or 0
            if action == "add" and (name in configured or stored):
                raise McpServerExists(name, "the store: an operator added it" if stored else "agentrt.toml")
            if action == "change" and name not in configured and not stored:
                known = set(configured) | set(conn.execute(select(c.server).distinct()).scalars())
                raise McpServerNotFound(name, sorted(known))
            row = conn.execute(insert(mcp_server_changes).values(
                server=name, action=action, config=self._seal(config.model_dump_json(), f"mcp_server:{name}"),
                principal=principal, reason=reason, created_at=change.at,
            ))
            change_id = row.inserted_primary_key[0] if row.inserted_primary_key is not None else change.at.isoformat()
            self.record_act(
                principal, f"{action}_mcp_server", "mcp_server", name, reason=reason,
                detail={"transport": config.transport, "target": config.url or config.command},
                key=f"mcp_server:{name}:{action}:{change_id}", at=change.at, conn=conn,
            )
        return change

    def added_mcp_servers(self) -> list[str]:
        """The names of the servers operators added at run time that are not revoked, sorted."""
        changes, decisions = mcp_server_changes.c, mcp_trust_decisions.c
        latest = select(func.max(decisions.id)).group_by(decisions.server)
        with self._engine.connect() as conn:
            added = set(conn.execute(select(changes.server).distinct()).scalars())
            revoked = set(conn.execute(
                select(decisions.server).where(decisions.id.in_(latest), decisions.trust == "revoked")
            ).scalars())
        return sorted(added - revoked)

    def mcp_server_changes(self) -> dict[str, McpServerChange]:
        """Server name → its latest change (its configuration), for every server an operator added
        or changed at run time."""
        c = mcp_server_changes.c
        latest = select(func.max(c.id)).group_by(c.server)
        with self._engine.connect() as conn:
            rows = list(conn.execute(select(mcp_server_changes).where(c.id.in_(latest))).mappings())
        return {
            row["server"]: McpServerChange(
                server=row["server"], action=row["action"], principal=row["principal"], reason=row["reason"],
                at=utc(row["created_at"]),
                config=McpServerConfig.model_validate_json(self._open(row["config"], f"mcp_server:{row['server']}")),
            )
            for row in rows
        }


def _decision(row: RowMapping) -> McpTrustDecision:
    return McpTrustDecision(
        server=row["server"], trust=row["trust"], principal=row["principal"], reason=row["reason"], at=utc(row["created_at"]),
    )


def _event(row: RowMapping) -> McpServerEvent:
    values = dict(row)
    values.pop("id", None)
    values["at"] = utc(values["at"])
    return McpServerEvent.model_validate(values)
