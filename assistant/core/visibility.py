"""The one rule for stored text: who may see a stored question, answer, comment, correction, ticket or
audit query, and a private upload's file name.

A stored text is shown to a viewer only if the viewer may read every document its answer cited (or it
cited none); otherwise a view shows that the item exists (counts, dates, rating) with the text as
`None` and `withheld: true`. A document counts as readable when it still exists (not deleted) and its
ACL admits one of the viewer's ACL tokens (`principals.may_read`, the check behind search and downloads);
a document deleted since, or one that cannot be resolved any more, counts as readable only for the
principal who asked. Admins get no exception; an auditor reads the audit trail in full (`full=True`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from assistant.core.db.accounts import group_names
from assistant.core.db.documents import acls_by_id, acls_by_path
from assistant.core.db.session import Database
from assistant.core.principals import Principal, may_read


@dataclass(frozen=True)
class Cited:
    """What a stored item cited: document IDs, source paths (old citations without an ID) and whether
    some of its citations cannot be resolved to a document at all (chunk IDs only)."""

    doc_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    unresolved: bool = False

    @staticmethod
    def of_citations(citations: Iterable[dict[str, Any]] | None) -> Cited:
        """The documents of stored citations (`Citation.to_dict()` dicts: `doc_id`, else `source`)."""
        doc_ids, sources, unresolved = [], [], False
        for c in citations or ():
            if not isinstance(c, dict):
                unresolved = True
            elif c.get("doc_id"):
                doc_ids.append(str(c["doc_id"]))
            elif c.get("source"):
                sources.append(str(c["source"]))
            else:
                unresolved = True
        return Cited(tuple(doc_ids), tuple(sources), unresolved)


class Visibility:
    """The rule for one viewer, with the documents' ACLs read once per view (call per request).

    Args:
        db: the SQL database holding `documents`.
        viewer: who looks.
        full: show everything (the auditor reading the audit trail); nothing else passes it.
    """

    def __init__(self, db: Database, viewer: Principal, *, full: bool = False):
        self._db = db
        self.viewer = viewer
        self.full = full
        self._by_id: dict[str, tuple[list[str], bool]] = {}  # doc_id -> (acl, deleted)
        self._by_path: dict[str, list[tuple[list[str], bool]]] = {}
        self._groups_of: dict[int, frozenset[str]] = {}  # user ID -> group names

    def _load(self, doc_ids: Iterable[str], sources: Iterable[str]) -> None:
        ids = sorted({d for d in doc_ids if d not in self._by_id})
        paths = sorted({p for p in sources if p not in self._by_path})
        if not ids and not paths:
            return
        self._by_id.update(acls_by_id(self._db, ids))
        self._by_path.update(acls_by_path(self._db, paths))
        for doc_id in ids:
            self._by_id.setdefault(doc_id, ([], True))  # gone from the database: as deleted
        for path in paths:
            self._by_path.setdefault(path, [])

    def is_viewer(self, asked_by: int | str | None) -> bool:
        """True when `asked_by` (a user ID or a principal name) is the viewer."""
        if asked_by is None:
            return False
        if isinstance(asked_by, int):
            return self.viewer.user_id is not None and asked_by == self.viewer.user_id
        return asked_by == self.viewer.name

    def may_see(self, cited: Cited, *, asked_by: int | str | None = None) -> bool:
        """Whether the viewer may see the text of an item that cited `cited`, asked by `asked_by`.

        Args:
            cited: the documents the item's answer cited (or the audit row's documents).
            asked_by: the asker's user ID or principal name; the asker also sees text whose cited
                documents were deleted since (but not text citing a document they may no longer read).
        """
        if self.full:
            return True
        own = self.is_viewer(asked_by)
        if cited.unresolved and not own:
            return False
        self._load(cited.doc_ids, cited.sources)
        for doc_id in cited.doc_ids:
            acl, deleted = self._by_id[doc_id]
            if not ((deleted and own) or (not deleted and may_read(acl, self.viewer))):
                return False
        for path in cited.sources:
            live = [acl for acl, deleted in self._by_path[path] if not deleted]
            if not live:
                if not own:
                    return False
            elif not all(may_read(acl, self.viewer) for acl in live):
                return False
        return True

    def may_see_authored(self, cited: Cited, *, author_id: int | None) -> bool:
        """Whether the viewer may see text a member wrote about an answer (a comment, a corrected
        answer) with the answer it rates. `may_see` first; and when the answer cited no document (a
        "not found"), the member's own words may still hold what only their groups read (a correction
        that states a restricted figure), so the viewer must then hold every group the author holds.

        Args:
            cited: the documents the rated answer cited.
            author_id: the user ID of the member who wrote the text (None: unknown, shown only in full).
        """
        if not self.may_see(cited, asked_by=author_id):
            return False
        if self.full or cited.doc_ids or cited.sources or self.is_viewer(author_id):
            return True
        if author_id is None:
            return False
        if author_id not in self._groups_of:
            self._groups_of[author_id] = frozenset(group_names(self._db, author_id))
        return self._groups_of[author_id] <= self.viewer.groups

    def may_see_file(self, acl: list[str] | None) -> bool:
        """Whether the viewer may see an ingested file's name and failure reason: its ACL (the one it
        has, or would have had had it not failed) admits the viewer; None (not recorded): not shown."""
        return self.full or (acl is not None and may_read(acl, self.viewer))

    def may_see_upload(self, audience: str, *, owner_id: int | None) -> bool:
        """Whether the viewer may see an upload's file name and server path: its owner, or a reader its
        audience (one ACL entry) admits; a private (`user:NAME`) upload is its owner's alone."""
        if self.full or self.is_viewer(owner_id):
            return True
        return may_read([audience], self.viewer)


# Audit details that name no text: kept on a withheld row (how it was asked, from which endpoint).
_AUDIT_SAFE_DETAILS = ("auth", "endpoint", "cached", "rows")


def withheld_audit_row(row: dict[str, Any]) -> dict[str, Any]:
    """An audit row (`audit.event_dict`) as shown to a viewer the rule withholds it from: who, when,
    which action and documents, with `query` None, details without text and `withheld: true`."""
    details = {k: v for k, v in (row.get("details") or {}).items() if k in _AUDIT_SAFE_DETAILS}
    return {**row, "query": None, "details": details, "withheld": True}
