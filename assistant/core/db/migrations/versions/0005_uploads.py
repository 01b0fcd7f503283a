"""uploads: files people upload with an audience, each ingested by its own sync job

Revision ID: 0005_uploads
Revises: 0004
"""

from alembic import op
import sqlalchemy as sa


revision = "0005_uploads"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("filename", sa.String(length=512), nullable=False),
        sa.Column("path", sa.String(length=2048), nullable=False),
        sa.Column("audience", sa.String(length=320), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("uploads", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_uploads_user_id"), ["user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_uploads_created_at"), ["created_at"], unique=False)


def downgrade() -> None:
    op.drop_table("uploads")
