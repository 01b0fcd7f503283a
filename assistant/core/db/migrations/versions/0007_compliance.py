"""compliance: audit trail hash chain and its columns, auditor role and legal hold, sign-in throttles

Revision ID: 0007_compliance
Revises: 0006_finetune
"""

from alembic import op
import sqlalchemy as sa


revision = "0007_compliance"
down_revision = "0006_finetune"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("auth_method", sa.String(length=32), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("address", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("doc_ids", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("content_hash", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("prev_hash", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("row_hash", sa.String(length=64), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("erased_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("is_auditor", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("legal_hold", sa.Boolean(), nullable=False, server_default=sa.false()))
    head = op.create_table(
        "audit_chain_head",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("last_hash", sa.String(length=64), nullable=False),
        sa.Column("appended", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(head, [{"id": 1, "last_hash": "", "appended": 0}])
    op.create_table(
        "sign_in_throttles",
        sa.Column("account", sa.String(length=255), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failure_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("blocked_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("account", "address"),
    )


def downgrade() -> None:
    op.drop_table("sign_in_throttles")
    op.drop_table("audit_chain_head")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("legal_hold")
        batch_op.drop_column("is_auditor")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        for column in ("erased_at", "row_hash", "prev_hash", "content_hash", "doc_ids", "address", "auth_method"):
            batch_op.drop_column(column)
