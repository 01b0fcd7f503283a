"""All SQL lives here: models, the engine and session, migrations and the queries the product uses."""

from assistant.core.db.models import (  # noqa: F401
    ApiKey,
    AuditEvent,
    AuthSession,
    Base,
    Conversation,
    Document,
    Feedback,
    Group,
    Job,
    JobItem,
    Membership,
    Message,
    Source,
    User,
)
from assistant.core.db.session import Database  # noqa: F401
