"""The SQL database: models, the engine and session, migrations, and the queries by entity that the API,
the CLI and the ingestion tasks call (`jobs`: job rows, their items and leases; `sources`: sources and
the ACL manifest rule; `conversations`: each user's chat threads and messages; `feedback`: ratings of
answers and the quality view; `helpdesk`: tickets and webhook deliveries). Accounts, sessions, API keys,
audit events and document access keep their
queries beside their rules in `assistant.core.auth`; principals in `assistant.core.identity`."""

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
from assistant.core.db.session import Database  # noqa: F401
