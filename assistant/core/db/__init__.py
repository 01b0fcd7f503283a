"""The SQL database: models, the engine and session, migrations, and every query, by entity, that the
API, the CLI, the features and the ingestion tasks call (`jobs`: job rows, their items and leases;
`sources`: sources and the ACL manifest rule; `documents`: what a reader may open; `document_sync`: the
ingestion's writes on documents; `conversations`: each user's chat threads and messages; `feedback`:
ratings of answers and the quality view; `helpdesk`: tickets and webhook deliveries; `accounts`,
`api_keys`, `sign_in_throttle`: users, groups, sessions, keys and sign-in failures; `identity`:
principals; `relocate`: paths rewritten after a restore; `schema`: ping and Alembic revisions; ...).
Sessions and connections are opened here and only here: callers pass the `Database` and plain values,
and get plain values or dataclasses back."""

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
