"""Compaction summaries and externally stored payloads.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "context_summaries",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("summary_id", sa.Integer(), nullable=False),
        sa.Column("upto_position", sa.Integer(), nullable=False),
        sa.Column("profile", sa.String(255), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "summary_id", name="pk_context_summaries"),
    )
    op.create_table(
        "payloads",
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_payloads"),
    )


def downgrade() -> None:
    op.drop_table("payloads")
    op.drop_table("context_summaries")
