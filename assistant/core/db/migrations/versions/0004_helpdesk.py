"""helpdesk tickets, webhook deliveries, per-key rate limits and webhooks

Revision ID: 0004
Revises: 0003
"""

from alembic import op
import sqlalchemy as sa


revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("requests_per_minute", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("tokens_per_minute", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("webhook_url", sa.String(length=2048), nullable=True))
        batch_op.add_column(sa.Column("webhook_secret", sa.String(length=128), nullable=True))
    op.create_table(
        "helpdesk_tickets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(length=255), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("external_id", sa.String(length=255), nullable=True),
        sa.Column("subject", sa.String(length=500), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("requester", sa.String(length=320), nullable=False),
        sa.Column("requester_known", sa.Boolean(), nullable=False),
        sa.Column("category", sa.String(length=128), nullable=True),
        sa.Column("language", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("decision", sa.String(length=16), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("reply", sa.Text(), nullable=False),
        sa.Column("citations", sa.JSON(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("resolved_by", sa.String(length=255), nullable=True),
        sa.Column("audience", sa.JSON(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("resolution_job_id", sa.Integer(), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("client", "idempotency_key"),
    )
    with op.batch_alter_table("helpdesk_tickets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_helpdesk_tickets_client"), ["client"], unique=False)
        batch_op.create_index(batch_op.f("ix_helpdesk_tickets_category"), ["category"], unique=False)
        batch_op.create_index(batch_op.f("ix_helpdesk_tickets_decision"), ["decision"], unique=False)
        batch_op.create_index(batch_op.f("ix_helpdesk_tickets_created_at"), ["created_at"], unique=False)
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ticket_id", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(length=255), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.JSON(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["ticket_id"], ["helpdesk_tickets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_ticket_id"), ["ticket_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_client"), ["client"], unique=False)
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_status"), ["status"], unique=False)


def downgrade() -> None:
    op.drop_table("webhook_deliveries")
    op.drop_table("helpdesk_tickets")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("webhook_secret")
        batch_op.drop_column("webhook_url")
        batch_op.drop_column("tokens_per_minute")
        batch_op.drop_column("requests_per_minute")
