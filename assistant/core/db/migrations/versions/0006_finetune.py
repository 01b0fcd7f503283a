"""finetune dataset snapshots, the adapter registry and which adapter produced each answer

Revision ID: 0006_finetune
Revises: 0005_uploads
"""

from alembic import op
import sqlalchemy as sa


revision = "0006_finetune"
down_revision = "0005_uploads"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dataset_snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("audience", sa.String(length=255), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("path", sa.String(length=2048), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_dataset_snapshots_audience", "dataset_snapshots", ["audience"])
    op.create_table(
        "adapters",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("audience", sa.String(length=255), nullable=False),
        sa.Column("base_model", sa.String(length=512), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("hyperparameters", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("path", sa.String(length=2048), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("promoted_by", sa.String(length=255), nullable=True),
        sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["snapshot_id"], ["dataset_snapshots.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_adapters_audience", "adapters", ["audience"])
    op.create_index("ix_adapters_status", "adapters", ["status"])
    op.create_table(
        "answer_adapters",
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("adapter", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("message_id"),
    )
    op.create_index("ix_answer_adapters_adapter", "answer_adapters", ["adapter"])


def downgrade() -> None:
    op.drop_table("answer_adapters")
    op.drop_table("adapters")
    op.drop_table("dataset_snapshots")
