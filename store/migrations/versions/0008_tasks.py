"""Autonomous tasks: one row per task, its events by (task_id, seq) and its checkpoints by (task_id, number).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-11
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("spend_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("task_id", name="pk_tasks"),
    )
    op.create_index("ix_tasks_owner_created_at", "tasks", ["owner", "created_at"])
    op.create_index("ix_tasks_created_at", "tasks", ["created_at"])
    op.create_table(
        "task_events",
        sa.Column("task_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "seq", name="pk_task_events"),
    )
    op.create_table(
        "task_checkpoints",
        sa.Column("task_id", sa.String(255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "number", name="pk_task_checkpoints"),
    )


def downgrade() -> None:
    op.drop_table("task_checkpoints")
    op.drop_table("task_events")
    op.drop_index("ix_tasks_created_at", table_name="tasks")
    op.drop_index("ix_tasks_owner_created_at", table_name="tasks")
    op.drop_table("tasks")
