"""Webhooks: watched sessions, tasks and runs with their cursors, and the delivery log.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_watches",
        sa.Column("watch_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target_id", sa.Text(), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("cursor", sa.Integer(), nullable=False),
        sa.Column("last_status", sa.String(64), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('session', 'task', 'run')", name="ck_webhook_watches_kind"),
        sa.CheckConstraint("state IN ('active', 'ended')", name="ck_webhook_watches_state"),
        sa.PrimaryKeyConstraint("watch_id", name="pk_webhook_watches"),
    )
    op.create_index("ix_webhook_watches_state", "webhook_watches", ["state"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("webhook_id", sa.String(64), nullable=False),
        sa.Column("target_url", sa.Text(), nullable=False),
        sa.Column("watch_id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('pending', 'delivered', 'failed')", name="ck_webhook_deliveries_state"),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_deliveries"),
        sa.UniqueConstraint("webhook_id", "target_url", name="uq_webhook_deliveries_webhook_id_target_url"),
    )
    op.create_index(
        "ix_webhook_deliveries_target_url_state_next_attempt_at",
        "webhook_deliveries",
        ["target_url", "state", "next_attempt_at"],
    )
    op.create_index("ix_webhook_deliveries_watch_id", "webhook_deliveries", ["watch_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_watch_id", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_target_url_state_next_attempt_at", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhook_watches_state", table_name="webhook_watches")
    op.drop_table("webhook_watches")
