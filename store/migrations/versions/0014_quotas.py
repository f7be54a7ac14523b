"""Tenant quotas: the cost and tool calls of each model call attempt on its usage receipt (so a
tenant's day is summed from receipts), an index to sum a day, and the operators' quota raises.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_receipts") as batch:
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("tool_calls", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_usage_receipts_created_at", "usage_receipts", ["created_at"])
    op.create_table(
        "quota_raises",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("quota", sa.String(64), nullable=False),
        sa.Column("limit_value", sa.Float(), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_quota_raises"),
    )
    op.create_index("ix_quota_raises_tenant_created_at", "quota_raises", ["tenant", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_quota_raises_tenant_created_at", table_name="quota_raises")
    op.drop_table("quota_raises")
    op.drop_index("ix_usage_receipts_created_at", table_name="usage_receipts")
    with op.batch_alter_table("usage_receipts") as batch:
        batch.drop_column("tool_calls")
        batch.drop_column("cost_usd")
