"""every answered question counts (answer_usage), and a rating records the documents its answer cited

Revision ID: 0011_answer_usage
Revises: 0010_feedback_correction
"""

from alembic import op
import sqlalchemy as sa


revision = "0011_answer_usage"
down_revision = "0010_feedback_correction"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "answer_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("endpoint", sa.String(length=32), nullable=False),
        sa.Column("abstained", sa.Boolean(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_answer_usage_at"), "answer_usage", ["at"], unique=False)
    with op.batch_alter_table("feedback", schema=None) as batch_op:
        batch_op.add_column(sa.Column("doc_ids", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("feedback", schema=None) as batch_op:
        batch_op.drop_column("doc_ids")
    op.drop_index(op.f("ix_answer_usage_at"), table_name="answer_usage")
    op.drop_table("answer_usage")
