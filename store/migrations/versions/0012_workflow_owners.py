"""Workflow owners: who first started each session, task and graph id, kept after Temporal forgets.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workflow_owners",
        sa.Column("workflow_id", sa.String(1024), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("workflow_id", name="pk_workflow_owners"),
    )


def downgrade() -> None:
    op.drop_table("workflow_owners")
