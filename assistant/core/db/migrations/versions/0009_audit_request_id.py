"""audit rows carry the request ID of the API call they were written for

Revision ID: 0009_audit_request_id
Revises: 0007_compliance
"""

from alembic import op
import sqlalchemy as sa


revision = "0009_audit_request_id"
down_revision = "0007_compliance"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("request_id", sa.String(length=64), nullable=True))
        batch_op.create_index(batch_op.f("ix_audit_events_request_id"), ["request_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_events_request_id"))
        batch_op.drop_column("request_id")
