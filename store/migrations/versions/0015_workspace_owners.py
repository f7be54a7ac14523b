"""Workspace owners: which principal first started work in a directory under the gateway's
workspace root, by the SHA-256 of its real path.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workspace_owners",
        sa.Column("path_sha256", sa.String(64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("path_sha256", name="pk_workspace_owners"),
    )


def downgrade() -> None:
    op.drop_table("workspace_owners")
