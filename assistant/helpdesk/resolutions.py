"""An agent's resolution of a ticket: its outcome against the suggested reply, and the document it becomes
(a Markdown file under `Settings.resolutions_dir`, ingested by a sync job with the chosen audience ACL)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from assistant.core.db.documents import acls_by_id, acls_by_path
from assistant.core.db.jobs import queue_sync_job
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError
from assistant.helpdesk.store import TicketRecord, ticket_cited
from assistant.helpdesk.tickets import latest_message

# Similarity of reply and resolution (difflib ratio of their normalised words) at or above which the
# agent sent the reply as it was, and at or above which it was edited rather than replaced.
ACCEPTED_MIN_SIMILARITY = 0.9
EDITED_MIN_SIMILARITY = 0.5
_MARKERS = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(_MARKERS.sub(" ", text).casefold())


def resolution_outcome(ticket: TicketRecord, resolution: str) -> str:
    """`accepted`, `edited` or `rejected`: how the agent's final answer compares to the suggested reply.

    A ticket whose reply was declined (no answer in the documents) is `rejected` by any resolution;
    otherwise the difflib ratio of the two texts' words (punctuation and `[n]` markers left out) decides
    (`ACCEPTED_MIN_SIMILARITY`, `EDITED_MIN_SIMILARITY`).
    """
    if not ticket.citations:
        return "rejected"
    ratio = difflib.SequenceMatcher(a=_words(ticket.reply), b=_words(resolution), autojunk=False).ratio()
    if ratio >= ACCEPTED_MIN_SIMILARITY:
        return "accepted"
    return "edited" if ratio >= EDITED_MIN_SIMILARITY else "rejected"


def check_audience(db: Database, ticket: TicketRecord, audience: list[str]) -> None:
    """Refuse a resolution audience wider than the readers of what the ticket's reply rests on.

    A resolution is written from the reply and its cited documents (for a conversation handed over from the
    web app, from the documents its answers cited, `store.ticket_cited`); published to `audience`, it becomes
    a document anyone the audience admits can search. So each entry must appear in the ACL of every live
    such document, unless that document is readable by `everyone` (fresh-user trials: a finance-only key
    published a reply quoting a finance page to `everyone`, and a hand-over of a finance conversation).

    Args:
        ticket: the ticket being resolved (its `citations`).
        audience: the validated ACL entries asked for.

    Raises:
        InvalidRequestError: code `audience_too_wide`, naming the entries refused, the document and the
            entries allowed.
    """
    cited = ticket_cited(ticket)  # a hand-over's conversation documents too (its text quotes their answers)
    names = {str(c.get("doc_id")): str(c.get("source") or c.get("doc_id")) for c in ticket.citations if isinstance(c, dict)}
    acls = [(names.get(doc_id, doc_id), acl) for doc_id, (acl, deleted) in acls_by_id(db, cited.doc_ids).items() if not deleted]
    acls += [(path, acl) for path, rows in acls_by_path(db, cited.sources).items() for acl, deleted in rows if not deleted]
    for name, acl in acls:
        refused = [entry for entry in audience if "everyone" not in acl and entry not in acl]
        if refused:
            raise InvalidRequestError(
                f"audience {', '.join(refused)} is wider than the readers of a document ticket {ticket.id}'s reply "
                f"cites ({name}, readable by {', '.join(acl) or 'nobody'}): choose entries of its ACL",
                code="audience_too_wide",
            )


def resolution_document(ticket: TicketRecord, resolution: str) -> str:
    """The Markdown document a resolved ticket becomes: its subject as title, the question (the latest
    message, without the requester's name) and the resolution."""
    title = " ".join(ticket.subject.split()) or f"Helpdesk ticket {ticket.id}"
    question = latest_message(ticket.body)
    parts = [f"# {title}", ""]
    if question:
        parts += ["## Question", "", question, ""]
    parts += ["## Resolution", "", resolution.strip(), ""]
    return "\n".join(parts)


def publish_resolution(db: Database, ticket: TicketRecord, *, folder: Path, audience: list[str]) -> int:
    """Write the resolution of `ticket` to `folder/ticket-<id>.md` and queue its ingestion, readable by
    `audience` (validated ACL entries) only.

    Returns:
        The ID of the queued sync job; the caller submits it (`JOB_TASKS["sync"]`).
    """
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ticket-{ticket.id}.md"
    path.write_text(resolution_document(ticket, ticket.resolution or ""), encoding="utf-8")
    job = queue_sync_job(db, {"path": str(path.resolve()), "acl": {"default": list(audience)}})
    return job.id
