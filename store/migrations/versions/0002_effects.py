"""Effect ledger and usage receipts.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "effects",
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("result_text", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("idempotency_key", name="pk_effects"),
        sa.CheckConstraint(
            "state IN ('claimed', 'applied', 'failed', 'not_applied')", name="ck_effects_state"
        ),
    )
    op.create_index("ix_effects_session_id", "effects", ["session_id"])
    op.create_table(
        "usage_receipts",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "turn_id", "round", "attempt", name="pk_usage_receipts"),
        sa.CheckConstraint(
            "status IN ('started', 'completed', 'interrupted')", name="ck_usage_receipts_status"
        ),
    )


def downgrade() -> None:
    op.drop_table("usage_receipts")
    op.drop_index("ix_effects_session_id", table_name="effects")
    op.drop_table("effects")
