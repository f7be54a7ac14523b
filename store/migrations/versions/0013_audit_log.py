"""The audit log: one row per act of a principal (an approval, a cancel, a budget raised, a memory
decided ...), recorded once by its ``key`` (the event that records the act, or the store row it changed).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(600), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target_kind", sa.String(16), nullable=False),
        sa.Column("target_id", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("detail_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
        sa.UniqueConstraint("key", name="uq_audit_log_key"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    op.create_index("ix_audit_log_principal_at", "audit_log", ["principal", "at"])
    op.create_index("ix_audit_log_target_id_at", "audit_log", ["target_id", "at"])
    op.create_index("ix_audit_log_owner_at", "audit_log", ["owner", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_owner_at", table_name="audit_log")
    op.drop_index("ix_audit_log_target_id_at", table_name="audit_log")
    op.drop_index("ix_audit_log_principal_at", table_name="audit_log")
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_table("audit_log")
