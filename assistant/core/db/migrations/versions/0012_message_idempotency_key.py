"""a question's Idempotency-Key, unique per conversation (double submit, issue 41)

Revision ID: 0012_message_idempotency_key
Revises: 0011_answer_usage
"""

from alembic import op
import sqlalchemy as sa


revision = "0012_message_idempotency_key"
down_revision = "0011_answer_usage"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("idempotency_key", sa.String(length=255), nullable=True))
        batch_op.create_unique_constraint("uq_messages_conversation_id_idempotency_key", ["conversation_id", "idempotency_key"])


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_constraint("uq_messages_conversation_id_idempotency_key", type_="unique")
        batch_op.drop_column("idempotency_key")
