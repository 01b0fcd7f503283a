"""a job item's ACL: who may see a file's name and failure reason in the admin views

Revision ID: 0013_job_item_acl
Revises: 0012_message_idempotency_key
"""

from alembic import op
import sqlalchemy as sa


revision = "0013_job_item_acl"
down_revision = "0012_message_idempotency_key"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("job_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("acl", sa.JSON(), nullable=True))
    # Backfill what is known: a file that became a document has its ACL; a file of a source without
    # a manifest is everyone's. Any other (a failed file of a restricted source) stays None: not shown.
    bind = op.get_bind()
    docs = sa.table("documents", sa.column("id", sa.String), sa.column("acl", sa.JSON))
    sources = sa.table("sources", sa.column("id", sa.Integer), sa.column("acl_manifest", sa.JSON))
    items = sa.table("job_items", sa.column("id", sa.Integer), sa.column("acl", sa.JSON))
    acls = dict(bind.execute(sa.select(docs.c.id, docs.c.acl)).all())
    open_sources = {sid for sid, manifest in bind.execute(sa.select(sources.c.id, sources.c.acl_manifest)) if not manifest}
    rows = bind.execute(sa.text("SELECT i.id, i.document_id, j.source_id FROM job_items i JOIN jobs j ON j.id = i.job_id"))
    updates = [
        {"item_id": item_id, "item_acl": acls.get(doc_id) or ["everyone"]}
        for item_id, doc_id, source_id in rows if acls.get(doc_id) or source_id in open_sources
    ]
    if updates:
        bind.execute(items.update().where(items.c.id == sa.bindparam("item_id")).values(acl=sa.bindparam("item_acl", type_=sa.JSON)), updates)


def downgrade() -> None:
    with op.batch_alter_table("job_items", schema=None) as batch_op:
        batch_op.drop_column("acl")
