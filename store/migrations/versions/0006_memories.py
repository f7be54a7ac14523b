"""Memories that outlive a session: one row per memory, per owner, with its scope and status.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("memory_id", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(255), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("memory_id", name="pk_memories"),
        sa.CheckConstraint("scope IN ('session', 'workspace', 'user')", name="ck_memories_scope"),
        sa.CheckConstraint(
            "status IN ('proposed', 'accepted', 'rejected', 'superseded')", name="ck_memories_status"
        ),
    )
    op.create_index("ix_memories_owner_status", "memories", ["owner", "status"])
    op.create_index("ix_memories_session_id", "memories", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_memories_session_id", table_name="memories")
    op.drop_index("ix_memories_owner_status", table_name="memories")
    op.drop_table("memories")
