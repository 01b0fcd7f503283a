"""SQLAlchemy 2 models: the metadata that is the source of truth beside the Qdrant collection."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, overload
from urllib.parse import unquote_to_bytes, urlparse

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    """Timezone-aware now (UTC)."""
    return datetime.now(UTC)


@overload
def utc(moment: datetime) -> datetime: ...


@overload
def utc(moment: None) -> None: ...


def utc(moment: datetime | None) -> datetime | None:
    """`moment` as an aware UTC datetime; a naive one is read as UTC (how SQLite hands them back and
    how the product writes them). None stays None."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """`DateTime(timezone=True)` that stores UTC and loads aware UTC datetimes on every backend.

    SQLite keeps no offset and hands back naive datetimes; PostgreSQL's `timestamptz` hands back the
    session's zone. Either way a loaded value is aware UTC here, and a bound one is converted to UTC
    (a naive value is taken as UTC). The DDL is the plain `DateTime(timezone=True)`, so migrations and
    the schema are unchanged.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """UTC before it is written or compared."""
        return utc(value)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        """Aware UTC when loaded."""
        return utc(value)


def file_uri_path(uri: str) -> Path:
    """The local path a `file://` URI names, bytes of non-UTF-8 names included (os.fsdecode)."""
    return Path(os.fsdecode(unquote_to_bytes(urlparse(uri).path)))


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON, list[Any]: JSON}


class Source(Base):
    """A place documents come from (a folder, uploads, later connectors)."""

    __tablename__ = "sources"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), default="folder")
    uri: Mapped[str] = mapped_column(String(2048), unique=True)
    acl_manifest: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    documents: Mapped[list[Document]] = relationship(back_populates="source")

    @property
    def path(self) -> Path:
        """The folder (kind `folder`) or file (kind `file`) on this machine that `uri` names."""
        return file_uri_path(self.uri)


class Document(Base):
    """One file of a source. `id` is deterministic (uuid5 of `uri`); chunk IDs derive from it."""

    __tablename__ = "documents"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    source_id: Mapped[int] = mapped_column(ForeignKey("sources.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(String(2048))
    uri: Mapped[str] = mapped_column(String(2048), unique=True)
    title: Mapped[str] = mapped_column(String(1024), default="")
    mime: Mapped[str] = mapped_column(String(128), default="")
    content_hash: Mapped[str] = mapped_column(String(64), default="", index=True)
    size_bytes: Mapped[int] = mapped_column(Integer, default=0)
    acl: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(32), default="queued", index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    page_count: Mapped[int | None] = mapped_column(Integer, default=None)
    embedding_model: Mapped[str] = mapped_column(String(256), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    source: Mapped[Source] = relationship(back_populates="documents")


class Job(Base):
    """A unit of background work (a sync, an upload, a finetune run). The row is the truth."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32), default="queued", index=True)
    source_id: Mapped[int | None] = mapped_column(ForeignKey("sources.id", ondelete="SET NULL"))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    totals: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reason: Mapped[str] = mapped_column(Text, default="")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    items: Mapped[list[JobItem]] = relationship(back_populates="job", cascade="all, delete-orphan")


class JobItem(Base):
    """Outcome of one file within a job."""

    __tablename__ = "job_items"
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    path: Mapped[str] = mapped_column(String(2048))
    document_id: Mapped[str | None] = mapped_column(String(36), default=None)
    # The ACL the file has (or would have had, if it failed): who may see its name and reason.
    acl: Mapped[list[str] | None] = mapped_column(JSON, default=None)
    status: Mapped[str] = mapped_column(String(32), default="queued")
    reason: Mapped[str] = mapped_column(Text, default="")
    chunks: Mapped[int] = mapped_column(Integer, default=0)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    job: Mapped[Job] = relationship(back_populates="items")


class User(Base):
    """A principal: a person (local or single sign-on) or a service account behind API keys."""

    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    display_name: Mapped[str] = mapped_column(String(255), default="")
    email: Mapped[str | None] = mapped_column(String(320), default=None)
    password_hash: Mapped[str | None] = mapped_column(String(255), default=None)
    oidc_subject: Mapped[str | None] = mapped_column(String(255), unique=True, default=None)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    is_service: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Issue 21: roles and legal hold.
    is_auditor: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    legal_hold: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)


class AuthSession(Base):
    """A browser session. The cookie holds a random token; this row, keyed by its SHA-256, says
    whether it is still valid, so sign-out, a password change and disabling an account end it
    on the server and a copied cookie stops working at once."""

    __tablename__ = "auth_sessions"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)


class Group(Base):
    __tablename__ = "groups"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)


class Membership(Base):
    __tablename__ = "memberships"
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True)


class ApiKey(Base):
    """An API key: only its hash is kept; `prefix` identifies it in lists."""

    __tablename__ = "api_keys"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    key_hash: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    # Per-key overrides of the settings' rate limits (None: the settings' value; 0: unlimited).
    requests_per_minute: Mapped[int | None] = mapped_column(Integer, default=None)
    tokens_per_minute: Mapped[int | None] = mapped_column(Integer, default=None)
    # Where helpdesk results are POSTed, and the shared secret they are signed with (HMAC-SHA256).
    webhook_url: Mapped[str | None] = mapped_column(String(2048), default=None)
    webhook_secret: Mapped[str | None] = mapped_column(String(128), default=None)
    __table_args__ = (UniqueConstraint("name", "user_id"),)


class AuditEvent(Base):
    """Who asked what, and which chunks were retrieved for them."""

    __tablename__ = "audit_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    principal: Mapped[str] = mapped_column(String(255), index=True)
    action: Mapped[str] = mapped_column(String(64))
    query: Mapped[str] = mapped_column(Text, default="")
    chunk_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Issue 21: how the principal signed in, from where, the documents behind the chunks, and the
    # hash chain (`content_hash` of this row's fields, `prev_hash` of the row before, `row_hash` of both).
    auth_method: Mapped[str] = mapped_column(String(32), nullable=False, default="")
    address: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    doc_ids: Mapped[list[str]] = mapped_column(JSON, nullable=False, default=list)
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    prev_hash: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    row_hash: Mapped[str] = mapped_column(String(64), nullable=False, default="")
    erased_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, default=None)
    # Issue 20: the request ID of the API call the row was written for (X-Request-ID, the logs).
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None, index=True)


class Conversation(Base):
    """A user's chat thread. Only its owner (`user_id`) ever sees it; `updated_at` moves with each message."""

    __tablename__ = "conversations"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(512), default="")
    share_token: Mapped[str | None] = mapped_column(String(64), unique=True, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow, index=True)


class Message(Base):
    """One turn of a conversation: the user's question or the assistant's answer (with its citations,
    and whether it was the "not found" answer)."""

    __tablename__ = "messages"
    # A question's `Idempotency-Key` is taken once per conversation (answering.resubmission).
    __table_args__ = (UniqueConstraint("conversation_id", "idempotency_key", name="uq_messages_conversation_id_idempotency_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text, default="")
    citations: Mapped[list[Any]] = mapped_column(JSON, default=list)
    abstained: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), default=None)


class Feedback(Base):
    """A reader's rating of an answer (+1 or -1, with an optional comment and an optional corrected
    answer: what the answer should have said, which finetune datasets learn in place of the model's),
    one per answer and reader.

    The question, the answer and the cited chunk IDs are copied in when it is given, so the rating
    keeps its meaning (for the quality view and finetune datasets) after the conversation is deleted;
    `message_id` then becomes NULL."""

    __tablename__ = "feedback"
    id: Mapped[int] = mapped_column(primary_key=True)
    message_id: Mapped[int | None] = mapped_column(ForeignKey("messages.id", ondelete="SET NULL"), index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    principal: Mapped[str] = mapped_column(String(255), default="", index=True)
    rating: Mapped[int] = mapped_column(Integer)
    comment: Mapped[str] = mapped_column(Text, default="")
    corrected_answer: Mapped[str | None] = mapped_column(Text)
    question: Mapped[str] = mapped_column(Text, default="")
    answer: Mapped[str] = mapped_column(Text, default="")
    chunk_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    # The documents the answer cited (issue 36: who may see this rating's text); None on rows rated
    # before it was recorded (their message's citations say it, while the message exists).
    doc_ids: Mapped[list[str] | None] = mapped_column(JSON, default=None)
    abstained: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    __table_args__ = (UniqueConstraint("message_id", "user_id"),)


class HelpdeskTicket(Base):
    """A ticket the helpdesk posted, the decision taken on it and, later, the agent's resolution.

    `client` is the service principal (API key account) that posted it: idempotency keys are unique per
    client. `request_hash` is the SHA-256 of the ticket's fields, so a different body under the same key
    is told apart from a retry. `evidence` holds what the decision rests on (retrieval scores of the
    cited chunks, the grounding verdicts)."""

    __tablename__ = "helpdesk_tickets"
    id: Mapped[int] = mapped_column(primary_key=True)
    client: Mapped[str] = mapped_column(String(255), index=True)
    idempotency_key: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))
    external_id: Mapped[str | None] = mapped_column(String(255), default=None)
    subject: Mapped[str] = mapped_column(String(500), default="")
    body: Mapped[str] = mapped_column(Text, default="")
    requester: Mapped[str] = mapped_column(String(320), default="")
    requester_known: Mapped[bool] = mapped_column(Boolean, default=False)
    category: Mapped[str | None] = mapped_column(String(128), default=None, index=True)
    language: Mapped[str] = mapped_column(String(8), default="en")
    state: Mapped[str] = mapped_column(String(16), default="pending")  # pending -> decided -> resolved
    decision: Mapped[str | None] = mapped_column(String(16), default=None, index=True)
    confidence: Mapped[float] = mapped_column(Float, default=0.0)
    reply: Mapped[str] = mapped_column(Text, default="")
    citations: Mapped[list[Any]] = mapped_column(JSON, default=list)
    reasons: Mapped[list[Any]] = mapped_column(JSON, default=list)
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    resolution: Mapped[str | None] = mapped_column(Text, default=None)
    resolved_by: Mapped[str | None] = mapped_column(String(255), default=None)
    audience: Mapped[list[str] | None] = mapped_column(JSON, default=None)
    outcome: Mapped[str | None] = mapped_column(String(16), default=None)  # accepted, edited, rejected
    resolution_job_id: Mapped[int | None] = mapped_column(Integer, default=None)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    __table_args__ = (UniqueConstraint("client", "idempotency_key"),)


class WebhookDelivery(Base):
    """One result to POST to a key's webhook; `attempts` lists each try (`at`, `status_code`, `error`)."""

    __tablename__ = "webhook_deliveries"
    id: Mapped[int] = mapped_column(primary_key=True)
    ticket_id: Mapped[int] = mapped_column(ForeignKey("helpdesk_tickets.id", ondelete="CASCADE"), index=True)
    client: Mapped[str] = mapped_column(String(255), index=True)
    url: Mapped[str] = mapped_column(String(2048))
    event: Mapped[str] = mapped_column(String(64), default="ticket.decided")
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)  # pending, delivered, dead
    attempts: Mapped[list[Any]] = mapped_column(JSON, default=list)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)


# --- issue 21: compliance (audit trail chain, sign-in throttling) ---


class AuditChainHead(Base):
    """The one row (id 1) holding the hash of the newest audit row. Each append updates it first, which
    serialises appends on PostgreSQL (row lock) and SQLite (write lock) so the chain never forks."""

    __tablename__ = "audit_chain_head"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_hash: Mapped[str] = mapped_column(String(64), default="")
    appended: Mapped[int] = mapped_column(Integer, default=0)


class SignInThrottle(Base):
    """Failed password sign-ins of one account name from one client address, and until when the next
    attempt of that pair waits (exponential back-off). Kept in SQL so every API process shares it."""

    __tablename__ = "sign_in_throttles"
    account: Mapped[str] = mapped_column(String(255), primary_key=True)
    address: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_failure_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    blocked_until: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)


# --- issue 16: uploads ---
class Upload(Base):
    """A file a person uploaded with an audience (`user:NAME`, `group:NAME` or `everyone`): kept under
    `Settings.resolved_uploads_dir` while it exists, ingested by sync job `job_id` as a file source of
    its own, and deleted (file, source, chunks) by its owner."""

    __tablename__ = "uploads"
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    filename: Mapped[str] = mapped_column(String(512))
    path: Mapped[str] = mapped_column(String(2048))
    audience: Mapped[str] = mapped_column(String(320))
    size_bytes: Mapped[int] = mapped_column(Integer, default=0)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


# --- issue 18: finetune dataset snapshots and the adapter registry ---
class DatasetSnapshot(Base):
    """A finetune dataset as built for one refresh: its audience, content hash (SHA-256 of its JSONL),
    rows by origin (`feedback`, `helpdesk`, `document`) and the file it was written to."""

    __tablename__ = "dataset_snapshots"
    id: Mapped[int] = mapped_column(primary_key=True)
    audience: Mapped[str] = mapped_column(String(255), default="everyone", index=True)
    content_hash: Mapped[str] = mapped_column(String(64), default="")
    counts: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    path: Mapped[str] = mapped_column(String(2048), default="")
    since: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Adapter(Base):
    """A LoRA adapter in the registry: base model, dataset, hyperparameters, gate metrics, files with
    their SHA-256, and its status (`candidate`, `canary`, `live`, `retired`, `failed`) with who set it
    and when. `name` is what the model server knows it by."""

    __tablename__ = "adapters"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    audience: Mapped[str] = mapped_column(String(255), default="everyone", index=True)
    base_model: Mapped[str] = mapped_column(String(512), default="")
    snapshot_id: Mapped[int | None] = mapped_column(ForeignKey("dataset_snapshots.id", ondelete="SET NULL"))
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    hyperparameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    files: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    path: Mapped[str] = mapped_column(String(2048), default="")
    status: Mapped[str] = mapped_column(String(16), default="candidate", index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    history: Mapped[list[Any]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    promoted_by: Mapped[str | None] = mapped_column(String(255), default=None)
    promoted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)


class AnswerAdapter(Base):
    """Which adapter produced an answer (absent: the base model), for comparing canary and live feedback."""

    __tablename__ = "answer_adapters"
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True)
    adapter: Mapped[str] = mapped_column(String(128), index=True)


# --- issue 36: every answered question counts, wherever it was asked ---
class AnswerUsage(Base):
    """One answer given outside a conversation (`/api/chat` without a conversation, `/v1`, the
    helpdesk): when, where (`endpoint`), "not found" or not, and the seconds it took. No text: the
    quality view counts these beside the conversations' messages."""

    __tablename__ = "answer_usage"
    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    endpoint: Mapped[str] = mapped_column(String(32))
    abstained: Mapped[bool] = mapped_column(Boolean, default=False)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
