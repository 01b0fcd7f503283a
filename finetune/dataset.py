"""The finetune dataset: rows an adapter's whole audience may read, from rated and corrected answers,
resolved tickets and question-answer pairs written from new chunks; scrubbed, de-duplicated, split,
snapshotted as JSONL."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from assistant.adapters import store as registry_db
from assistant.answering.grounding import Grounder, ground
from assistant.core.db.models import utcnow
from assistant.core.db.session import Database
from assistant.core.principals import EVERYONE
from assistant.core.vectorstore.base import VectorStore
from assistant.retrieval.retriever import RetrievedChunk
from finetune.scrub import scrub_rows
from finetune.store import changed_documents, rated_answers, resolved_tickets

NEAR_DUPLICATE_JACCARD = 0.8  # word-trigram resemblance above which two rows count as one
# Unrendered template syntax (Jinja/Liquid/Hugo `{{ ... }}` and `{% ... %}`, a handbook's
# `{{generator:team_members_list}}`): a site generator's instruction, not text to learn.
_TEMPLATE = re.compile(r"\{\{[^{}]{0,500}\}\}|\{%[^{}]{0,500}%\}")
_HEADING_LINE = re.compile(r"^#{1,6}\s.*$", re.MULTILINE)
MIN_PASSAGE_WORDS = 5  # words (outside headings) a chunk must keep once its template syntax is stripped
_MARKERS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")
_QA = re.compile(r"Q:\s*(?P<q>.+?)\s*\n+\s*A:\s*(?P<a>.+)", re.DOTALL)
QA_PROMPT = (
    "Read the passage. Write one question an employee could ask that the passage answers, then answer it "
    "using only the passage. Reply exactly as:\nQ: <question>\nA: <answer>"
)


@dataclass(frozen=True)
class Row:
    """One training example. `origin` is `feedback` (an answer rated up), `correction` (the corrected
    answer a reader gave with a rating), `helpdesk` or `document`; `ref` names where it came from
    (`feedback:12`, `ticket:3`, `chunk:<id>`); `split` is `train` or `heldout`."""

    origin: str
    ref: str
    question: str
    answer: str
    split: str = "train"


def audience_tokens(audience: str) -> set[str]:
    """The ACL entries every member of `audience` holds: `everyone`, and the group itself for `group:NAME`."""
    return {EVERYONE, audience}


def readable_by(acl: Iterable[str], audience: str) -> bool:
    """True when an item with `acl` may be read by the whole `audience` (an empty ACL: by nobody)."""
    return bool(set(acl) & audience_tokens(audience))


class ChunkAcls:
    """Chunk ID -> ACL as stored in the vector store, read per document on demand (no ACL filter)."""

    def __init__(self, store: VectorStore):
        self.store = store
        self._payloads: dict[str, dict[str, dict[str, Any]]] = {}

    def payloads(self, doc_id: str) -> dict[str, dict[str, Any]]:
        """Point ID -> payload of every chunk of `doc_id` (cached)."""
        if doc_id not in self._payloads:
            self._payloads[doc_id] = self.store.scroll_payloads(doc_id=doc_id)
        return self._payloads[doc_id]

    def acl(self, chunk_id: str, doc_ids: Iterable[str]) -> list[str] | None:
        """The ACL of `chunk_id`, looked for among the chunks of `doc_ids`; None when not found."""
        for doc_id in doc_ids:
            payload = self.payloads(doc_id).get(chunk_id)
            if payload is not None:
                return list(payload.get("acl") or [])
        return None


def feedback_rows(db: Database, acls: ChunkAcls, *, audience: str, since: datetime | None) -> tuple[list[Row], int]:
    """Rows of answers rated up, and of corrected answers (in place of the model's answer, whatever the
    rating), whose every cited chunk the audience may read: a correction is judged by the citations
    of the answer it corrects, as that answer would be.

    Returns:
        The rows (origin `feedback` or `correction`), and how many were left out for their citations
        (a chunk the audience may not read, or one no longer indexed).
    """
    rows, excluded = [], 0
    for rated in rated_answers(db, since=since):
        chunk_acls = [acls.acl(c, rated.doc_ids) for c in rated.chunk_ids]
        if any(acl is None or not readable_by(acl, audience) for acl in chunk_acls):
            excluded += 1
            continue
        origin = "correction" if rated.corrected_answer else "feedback"
        answer = _MARKERS.sub("", rated.corrected_answer or rated.answer).strip()
        if rated.question.strip() and answer:
            rows.append(Row(origin, f"feedback:{rated.feedback_id}", rated.question.strip(), answer))
    return rows, excluded


def ticket_rows(db: Database, *, audience: str, since: datetime | None) -> tuple[list[Row], int]:
    """Rows of resolved tickets whose resolution the audience may read; and how many were left out."""
    rows, excluded = [], 0
    for ticket in resolved_tickets(db, since=since):
        if not readable_by(ticket.audience, audience):
            excluded += 1
            continue
        rows.append(Row("helpdesk", f"ticket:{ticket.ticket_id}", ticket.question, ticket.answer.strip()))
    return rows, excluded


def _chunk(chunk_id: str, payload: dict[str, Any]) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id, doc_id=payload.get("doc_id", ""), chunk_index=int(payload.get("chunk_index", 0)),
        text=payload.get("text", ""), source=payload.get("source", ""), uri=payload.get("uri", ""),
        title=payload.get("title", ""), heading=payload.get("heading", ""), page=payload.get("page"),
        lang=payload.get("lang", ""), score=1.0, relevance=1.0,
    )


def passage_text(text: str) -> str | None:
    """`text` (a chunk's) without unrendered template syntax (`{{ ... }}`, `{% ... %}`), for writing
    training pairs from; unchanged when it holds none.

    Returns:
        The text with each template tag removed, or None when it held some and fewer than
        `MIN_PASSAGE_WORDS` words remain outside Markdown heading lines (a section that is only a
        placeholder, such as a handbook's `## Our Team` over `{{generator:...}}`).
    """
    stripped, tags = _TEMPLATE.subn("", text)
    if not tags:
        return text
    if len(re.findall(r"\w+", _HEADING_LINE.sub("", stripped))) < MIN_PASSAGE_WORDS:
        return None
    return re.sub(r"\n{3,}", "\n\n", stripped).strip()


def new_chunks(db: Database, acls: ChunkAcls, *, audience: str, since: datetime | None, limit: int) -> list[RetrievedChunk]:
    """Up to `limit` chunks of documents added or changed since `since` that the audience may read
    (both the document's ACL in SQL and the chunk's own ACL in the index must allow it), their text
    freed of template syntax; a chunk that is mostly template syntax is left out (`passage_text`)."""
    out: list[RetrievedChunk] = []
    for doc in changed_documents(db, since=since):
        if len(out) >= limit:
            break
        if not readable_by(doc.acl, audience):
            continue
        for chunk_id, payload in sorted(acls.payloads(doc.id).items(), key=lambda kv: kv[1].get("chunk_index", 0)):
            if not readable_by(payload.get("acl") or [], audience) or len(out) >= limit:
                continue
            text = passage_text(payload.get("text", ""))
            if text is not None:
                out.append(replace(_chunk(chunk_id, payload), text=text))
    return out


async def document_rows(chunks: list[RetrievedChunk], *, write_qa: Callable, per_chunk: int,
                        make_grounder: Callable[[list[RetrievedChunk]], Grounder]) -> tuple[list[Row], int]:
    """Question-answer pairs written by the LLM from each chunk, kept only when the grounding check
    (`assistant.answering.grounding.ground`) finds the answer supported by that chunk.

    Args:
        write_qa: `async (messages) -> str`, the LLM's completion (temperature 0).
        per_chunk: pairs asked for per chunk.
        make_grounder: a `Grounder` over the one chunk (with the embedder when there is one).

    Returns:
        The rows, and how many written pairs were dropped as unsupported or unreadable.
    """
    rows, dropped = [], 0
    for chunk in chunks:
        for i in range(per_chunk):
            reply = await write_qa([
                {"role": "system", "content": QA_PROMPT},
                {"role": "user", "content": f"Passage ({chunk.title}):\n{chunk.text}" + (f"\n(Write a different pair, number {i + 1}.)" if i else "")},
            ])
            m = _QA.search(reply or "")
            if not m:
                dropped += 1
                continue
            question, answer = m["q"].strip(), m["a"].strip()
            grounded = ground(answer, make_grounder([chunk]), lang=chunk.lang or "en")
            if grounded.declined or not question:
                dropped += 1
                continue
            rows.append(Row("document", f"chunk:{chunk.chunk_id}", question, _MARKERS.sub("", grounded.text).strip()))
    return rows, dropped


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.casefold())
    return {tuple(words[i:i + 3]) for i in range(max(1, len(words) - 2))}


def drop_duplicates(rows: list[Row]) -> tuple[list[Row], int]:
    """Rows without exact or near duplicates (Jaccard resemblance of word trigrams of question and answer
    at least `NEAR_DUPLICATE_JACCARD`; Broder 1997, "On the resemblance and containment of documents"),
    the first of each group kept. Returns the rows and how many were dropped."""
    kept: list[tuple[Row, set]] = []
    for row in rows:
        shingles = _shingles(f"{row.question} {row.answer}")
        if any(len(shingles & s) / max(1, len(shingles | s)) >= NEAR_DUPLICATE_JACCARD for _, s in kept):
            continue
        kept.append((row, shingles))
    return [r for r, _ in kept], len(rows) - len(kept)


def split_rows(rows: list[Row], share: float) -> list[Row]:
    """Mark about `share` of the rows `heldout`, chosen by a hash of the question (stable across runs,
    so the same question stays on the same side), keeping at least one `train` row."""
    out = []
    for row in rows:
        bucket = int(hashlib.sha256(row.question.casefold().encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        out.append(replace(row, split="heldout" if bucket < share else "train"))
    if out and all(r.split == "heldout" for r in out):
        out[0] = replace(out[0], split="train")
    return out


def write_snapshot(db: Database, rows: list[Row], *, root: Path, audience: str, since: datetime | None,
                   counts: dict[str, Any]) -> registry_db.SnapshotRecord:
    """Write `rows` as JSONL under `root/datasets/` and record the snapshot with its SHA-256 and counts
    (rows by origin and split, merged into `counts`)."""
    folder = root / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in rows).encode()
    digest = hashlib.sha256(data).hexdigest()
    path = folder / f"{audience.replace(':', '-')}-{utcnow():%Y%m%dT%H%M%S}-{digest[:12]}.jsonl"
    path.write_bytes(data)
    totals = dict(counts)
    for r in rows:
        totals[r.origin] = totals.get(r.origin, 0) + 1
        totals[r.split] = totals.get(r.split, 0) + 1
    totals["rows"] = len(rows)
    return registry_db.add_snapshot(db, audience=audience, content_hash=digest, counts=totals, path=str(path), since=since)


def read_snapshot(path: str | Path) -> list[Row]:
    """The rows of a snapshot's JSONL file."""
    return [Row(**json.loads(line)) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


async def build_dataset(db: Database, store: VectorStore, *, audience: str, root: Path, heldout_share: float,
                        since: datetime | None, write_qa: Callable | None, make_grounder: Callable,
                        qa_per_chunk: int = 1, max_new_chunks: int = 200) -> registry_db.SnapshotRecord:
    """Build, scrub, de-duplicate, split and snapshot the dataset of one refresh for `audience`.

    Args:
        since: rows and documents newer than this (None: everything).
        write_qa: the LLM completion used to write pairs from new chunks; None = no document rows.

    Returns:
        The recorded snapshot; its `counts` also say what was left out (`excluded_acl`,
        `unsupported_qa`, `duplicates`) and what was masked (`pii_*`).
    """
    acls = ChunkAcls(store)
    rated, excluded_feedback = feedback_rows(db, acls, audience=audience, since=since)
    tickets, excluded_tickets = ticket_rows(db, audience=audience, since=since)
    documents, unsupported = [], 0
    if write_qa is not None and qa_per_chunk:
        chunks = new_chunks(db, acls, audience=audience, since=since, limit=max_new_chunks)
        documents, unsupported = await document_rows(chunks, write_qa=write_qa, per_chunk=qa_per_chunk,
                                                     make_grounder=make_grounder)
    rows, masked = scrub_rows([*rated, *tickets, *documents])
    rows, duplicates = drop_duplicates(rows)
    rows = split_rows(rows, heldout_share)
    counts = {"excluded_acl": excluded_feedback + excluded_tickets, "unsupported_qa": unsupported,
              "duplicates": duplicates, **{f"pii_{k}": v for k, v in masked.items() if v}}
    return write_snapshot(db, rows, root=root, audience=audience, since=since, counts=counts)
