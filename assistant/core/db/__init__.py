"""The SQL database: models, the engine and sessions (`transactional`, `transactional_iter`: how a
feature's `store.py` runs its queries), migrations, the UTC column type, and the kernel's own tables'
queries, by entity (`jobs`: job rows, their items and leases; `sources`: sources and the ACL manifest
rule; `documents`: what a reader may open; `document_sync`: the ingestion's writes on documents;
`helpdesk`: tickets and webhook deliveries; `accounts`, `api_keys`, `sign_in_throttle`: users, groups,
sessions, keys and sign-in failures; `identity`: principals; `usage`: answers given outside a
conversation; `relocate`: paths rewritten after a restore; `schema`: ping and Alembic revisions; ...).
Each feature's own tables are queried in its package's `store.py`, written against a `Session` that
`transactional` opens. Sessions and connections are opened here and only here: callers pass the
`Database` and plain values, and get plain values or dataclasses back."""

from assistant.core.db.models import (  # noqa: F401
    ApiKey,
    AuditEvent,
    AuthSession,
    Base,
    Conversation,
    Document,
    Feedback,
    Group,
    HelpdeskTicket,
    Job,
    JobItem,
    Membership,
    Message,
    Source,
    User,
    WebhookDelivery,
)
from assistant.core.db.session import Database, transactional, transactional_iter  # noqa: F401
