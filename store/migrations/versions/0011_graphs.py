"""Task graphs: one row per graph and its events by (graph_id, seq).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "graphs",
        sa.Column("graph_id", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("spend_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("graph_id", name="pk_graphs"),
    )
    op.create_index("ix_graphs_owner_created_at", "graphs", ["owner", "created_at"])
    op.create_table(
        "graph_events",
        sa.Column("graph_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("graph_id", "seq", name="pk_graph_events"),
    )


def downgrade() -> None:
    op.drop_table("graph_events")
    op.drop_index("ix_graphs_owner_created_at", table_name="graphs")
    op.drop_table("graphs")
