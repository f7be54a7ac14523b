"""Initial schema: sessions, messages, events and token_deltas.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("profile", sa.String(255), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("config_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_sessions"),
    )
    op.create_index("ix_sessions_created_at", "sessions", ["created_at"])
    op.create_table(
        "messages",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=True),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("content_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "position", name="pk_messages"),
    )
    op.create_table(
        "events",
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_events"),
    )
    op.create_table(
        "token_deltas",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_token_deltas"),
    )
    op.create_index("ix_token_deltas_session_id_id", "token_deltas", ["session_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_token_deltas_session_id_id", table_name="token_deltas")
    op.drop_table("token_deltas")
    op.drop_table("events")
    op.drop_table("messages")
    op.drop_index("ix_sessions_created_at", table_name="sessions")
    op.drop_table("sessions")
