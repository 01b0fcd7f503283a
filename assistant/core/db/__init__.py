"""The SQL database: models, the engine and sessions (`transactional`, `transactional_iter`: how a
feature's `store.py` runs its queries), migrations, the UTC column type, and the kernel's own tables'
queries, by entity (`jobs`: job rows, their items and leases; `sources`: sources and the ACL manifest
rule; `documents`: what a reader may open; `document_sync`: the ingestion's writes on documents;
`accounts`, `api_keys`: users, groups, sessions and keys; `identity`: principals; `relocate`: paths
rewritten after a restore; `schema`: ping and Alembic revisions; ...). Each feature's own tables are
queried in its package's `store.py` (`assistant/answering/store.py`: conversations, messages, feedback;
`assistant/helpdesk/store.py`: tickets and webhook deliveries; `assistant/auth/store.py`: sign-in
throttling; `assistant/adapters/store.py`: the adapter registry; `assistant/compliance/store.py`: the
audit trail, retention, a user's own data; `assistant/operations/store.py`: the quality view;
`finetune/store.py`: the reads a dataset is built from), written against a `Session` that
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
