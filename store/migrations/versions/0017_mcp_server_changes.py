"""MCP servers changed at run time: an operator's added or changed server configuration, with who
and why (the latest one of a server is its configuration for every worker); and ``revoked``, an
operator's decision that no worker lists or calls a server's tools.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_TRUST = "ck_mcp_trust_decisions_trust"


def upgrade() -> None:
    op.create_table(
        "mcp_server_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("action IN ('add', 'change')", name="ck_mcp_server_changes_action"),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_server_changes"),
    )
    op.create_index("ix_mcp_server_changes_server_id", "mcp_server_changes", ["server", "id"])
    # 0016 named its constraint through the naming convention (ck_<table>_<name>); this one is named as is.
    _trust_levels("trust IN ('trusted', 'untrusted', 'revoked')", drop=_TRUST, create=op.f(_TRUST))


def downgrade() -> None:
    op.execute("DELETE FROM mcp_trust_decisions WHERE trust = 'revoked'")
    _trust_levels("trust IN ('trusted', 'untrusted')", drop=op.f(_TRUST), create=_TRUST)
    op.drop_index("ix_mcp_server_changes_server_id", table_name="mcp_server_changes")
    op.drop_table("mcp_server_changes")


def _trust_levels(check: str, *, drop: str, create: str) -> None:
    # SQLite cannot alter a constraint: batch mode copies the table under the new one.
    with op.batch_alter_table("mcp_trust_decisions") as batch:
        batch.drop_constraint(drop, type_="check")
        batch.create_check_constraint(create, check)
