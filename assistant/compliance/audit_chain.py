"""The audit trail's hash chain: each row stores the SHA-256 of the previous row's hash and its own
canonical content, so editing, inserting or deleting a row breaks every hash after it.

A row's erasable content (the query text) enters the chain only through its own digest
(`content_hash`): erasing a user's content replaces the text and keeps the digest, so the chain still
verifies and the erasure itself is visible (`erased_at`). This is the redactable-log construction of
"Secure Audit Logs to Support Computer Forensics" (Schneier and Kelsey, 1999) in its simplest form.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from assistant.compliance import store as audit_db
from assistant.core.db.models import AuditEvent
from assistant.core.db.session import Database

RETENTION_ACTION = "retention.purge"


def content_digest(text: str) -> str:
    """SHA-256 (hex) of a row's erasable content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(e: AuditEvent) -> bytes:
    fields: dict[str, Any] = {
        "id": e.id, "at": e.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "principal": e.principal,
        "auth_method": e.auth_method or "", "action": e.action, "address": e.address or "",
        "chunk_ids": list(e.chunk_ids or []), "doc_ids": list(e.doc_ids or []), "details": e.details or {},
        "content_hash": e.content_hash, "prev_hash": e.prev_hash or "", "request_id": e.request_id or "",
    }
    # RFC 8785-like: sorted keys, no insignificant white space, UTF-8.
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def row_digest(e: AuditEvent) -> str:
    """SHA-256 (hex) of a row's canonical content, its content digest and the previous row's hash."""
    return hashlib.sha256(_canonical(e)).hexdigest()


@dataclass
class ChainReport:
    """What `verify_chain` found. `ok` is False at the first broken row (`broken_id`, `problem`)."""

    ok: bool = True
    checked: int = 0
    erased: int = 0
    unchained: int = 0
    first_id: int | None = None
    last_id: int | None = None
    broken_id: int | None = None
    problem: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def _fail(report: ChainReport, row_id: int | None, problem: str) -> ChainReport:
    report.ok, report.broken_id, report.problem = False, row_id, problem
    return report


def verify_chain(db: Database, *, batch_rows: int = 5000) -> ChainReport:
    """Recompute every chained row's hashes, oldest first.

    Rows written before the chain existed (empty `row_hash`) are counted as `unchained`. When the
    oldest rows were removed by retention, the first remaining row's `prev_hash` must be the anchor
    a `retention.purge` row recorded.

    Returns:
        A `ChainReport`; `ok` False names the first row whose content, digest or link does not match,
        or says that rows after the last one were removed.
    """
    report = ChainReport()
    prev: str | None = None
    head_hash, anchors = audit_db.chain_state(db, anchor_action=RETENTION_ACTION)
    for rows in audit_db.event_batches(db, batch_rows=batch_rows):
        for e in rows:
            if not e.row_hash:
                if prev is not None:
                    return _fail(report, e.id, "a row without a hash after the chain began (inserted or emptied)")
                report.unchained += 1
                continue
            if prev is None:
                report.first_id = e.id
                if e.prev_hash and e.prev_hash not in anchors:
                    return _fail(report, e.id, "the first chained row links to a row that no retention purge removed")
            elif e.prev_hash != prev:
                return _fail(report, e.id, "its previous-row hash does not match the row before it (a row was removed or inserted)")
            if e.erased_at is None and content_digest(e.query or "") != e.content_hash:
                return _fail(report, e.id, "its query text does not match its content hash (edited)")
            if e.erased_at is not None:
                report.erased += 1
            if row_digest(e) != e.row_hash:
                return _fail(report, e.id, "its fields do not match its row hash (edited)")
            prev = e.row_hash
            report.checked += 1
            report.last_id = e.id
    if prev is not None and head_hash is not None and head_hash != prev:
        return _fail(report, report.last_id, "the newest rows after this one were removed (the chain head names another row)")
    if report.unchained:
        report.notes.append(f"{report.unchained} rows predate the hash chain (written before migration 0007)")
    if report.erased:
        report.notes.append(f"{report.erased} rows had their content erased (their content hash still chains)")
    return report
