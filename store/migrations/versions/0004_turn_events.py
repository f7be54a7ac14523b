"""An index on a turn's events: ``AgentClient.wait`` reads a turn's end from the store.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_session_id_turn_id", "events", ["session_id", "turn_id"])


def downgrade() -> None:
    op.drop_index("ix_events_session_id_turn_id", table_name="events")
