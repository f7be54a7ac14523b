"""MCP trust decisions: an operator's decision, with who and why, on how far an MCP server is
trusted; the latest one of a server overrides its ``trust`` in agentrt.toml.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_trust_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("trust", sa.String(16), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("trust IN ('trusted', 'untrusted')", name="ck_mcp_trust_decisions_trust"),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_trust_decisions"),
    )
    op.create_index("ix_mcp_trust_decisions_server_id", "mcp_trust_decisions", ["server", "id"])


def downgrade() -> None:
    op.drop_index("ix_mcp_trust_decisions_server_id", table_name="mcp_trust_decisions")
    op.drop_table("mcp_trust_decisions")
