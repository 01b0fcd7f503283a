"""feedback carries the corrected answer a reader supplied with their rating (finetune datasets use it)

Revision ID: 0010_feedback_correction
Revises: 0009_audit_request_id
"""

from alembic import op
import sqlalchemy as sa


revision = "0010_feedback_correction"
down_revision = "0009_audit_request_id"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("feedback", schema=None) as batch_op:
        batch_op.add_column(sa.Column("corrected_answer", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("feedback", schema=None) as batch_op:
        batch_op.drop_column("corrected_answer")
