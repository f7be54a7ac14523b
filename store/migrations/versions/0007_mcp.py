"""MCP server events per worker, and the tool listings turns offered the model (by digest).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_server_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("worker", sa.String(255), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("tools", sa.Integer(), nullable=True),
        sa.Column("diagnostic", sa.Text(), nullable=True),
        sa.Column("protocol_version", sa.String(32), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_server_events"),
    )
    op.create_index("ix_mcp_server_events_server_id", "mcp_server_events", ["server", "id"])
    op.create_table(
        "tool_listings",
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("specs", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", name="pk_tool_listings"),
    )


def downgrade() -> None:
    op.drop_table("tool_listings")
    op.drop_index("ix_mcp_server_events_server_id", table_name="mcp_server_events")
    op.drop_table("mcp_server_events")
