"""An index on a model call's token deltas: a stream reads one call's deltas by (session, turn, round).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_token_deltas_session_id_turn_id_round", "token_deltas", ["session_id", "turn_id", "round"])


def downgrade() -> None:
    op.drop_index("ix_token_deltas_session_id_turn_id_round", table_name="token_deltas")
