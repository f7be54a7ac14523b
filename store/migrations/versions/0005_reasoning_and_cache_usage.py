"""Reasoning blocks beside the transcript, and cache and reasoning token counts on usage receipts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

USAGE_COLUMNS = ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def upgrade() -> None:
    op.create_table(
        "reasoning",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=True),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("blocks_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "position", name="pk_reasoning"),
    )
    with op.batch_alter_table("usage_receipts") as batch:
        for name in USAGE_COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("usage_receipts") as batch:
        for name in reversed(USAGE_COLUMNS):
            batch.drop_column(name)
    op.drop_table("reasoning")
