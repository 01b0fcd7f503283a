"""The SQL database: models, the engine and session (`transactional`), migrations, and the kernel's own
queries, by entity, that the API, the CLI, the features and the ingestion tasks call (`jobs`: job rows,
their items and leases; `sources`: sources and the ACL manifest rule; `documents`: what a reader may
open; `document_sync`: the ingestion's writes on documents; `conversations`: each user's chat threads and
messages; `feedback`: ratings of answers and the quality view; `accounts`, `api_keys`: users, groups,
sessions and keys; `identity`: principals; `relocate`: paths rewritten after a restore; `schema`: ping
and Alembic revisions; ...). A feature's own tables are queried by its package's `store.py`
(`assistant/helpdesk/store.py`, `assistant/auth/store.py`, `assistant/adapters/store.py`,
`finetune/store.py`) through `transactional`. Sessions and connections are opened here and only here:
callers pass the `Database` and plain values, and get plain values or dataclasses back."""

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
from assistant.core.db.session import Database, transactional  # noqa: F401
