"""The queries on sources (the folders and files documents come from), and the rule that an ACL
manifest belongs to a whole folder source, which the API and the ingestion pipeline both apply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from sqlalchemy import delete, select, update

from assistant.core.acl_manifest import AclManifest
from assistant.core.db.models import Document, Job, Source
from assistant.core.db.session import Database
from assistant.core.errors import InvalidRequestError


@dataclass(frozen=True)
class SourceRecord:
    """A source: `kind` `folder` or `file`, the local `path` its `uri` names, and the ACL manifest
    stored with it (a dict as `AclManifest.to_dict` writes it; None before its first sync)."""

    id: int
    kind: str
    uri: str
    path: Path
    acl_manifest: dict[str, Any] | None


def list_sources(db: Database) -> list[SourceRecord]:
    """Every source, in the order they were created."""
    with db.session() as session:
        return [
            SourceRecord(id=s.id, kind=s.kind, uri=s.uri, path=s.path, acl_manifest=s.acl_manifest)
            for s in session.scalars(select(Source).order_by(Source.id))
        ]


def enclosing_folder_source(sources: Sequence[SourceRecord], path: Path) -> SourceRecord | None:
    """The innermost folder source that is `path` or holds it, if any."""
    enclosing = [s for s in sources if s.kind == "folder" and (path == s.path or s.path in path.parents)]
    return max(enclosing, key=lambda s: len(s.path.parts), default=None)


def check_manifest_scope(sources: Sequence[SourceRecord], path: Path, *, remedy: str) -> None:
    """Refuse an ACL manifest sent for `path` when `path` lies inside a folder source: the manifest
    belongs to the whole source, whose relative paths its rules match.

    Args:
        remedy: how the caller changes the source's manifest instead, with `{root}` for its folder
            (the API and the CLI say it in their own terms).

    Raises:
        InvalidRequestError: naming `path`, the source and the remedy.
    """
    source = enclosing_folder_source(sources, path)
    if source is not None and source.path != path:
        raise InvalidRequestError(
            f"path {str(path)!r} lies inside the source {str(source.path)!r}, whose ACL manifest covers it; "
            + remedy.format(root=source.path)
        )


def take_over_sources(db: Database, outer: Path, inner: Sequence[SourceRecord]) -> None:
    """Make the folder `outer` a source (if it is not one) and move the documents and jobs of the
    sources `inner` (folders inside it) over to it, deleting those sources."""
    with db.session() as session:
        source = session.scalar(select(Source).where(Source.uri == outer.as_uri()))
        if source is None:
            source = Source(kind="folder", uri=outer.as_uri())
            session.add(source)
            session.flush()
        olds = session.scalars(select(Source.id).where(Source.uri.in_([s.uri for s in inner]))).all()
        session.execute(update(Document).where(Document.source_id.in_(olds)).values(source_id=source.id))
        session.execute(update(Job).where(Job.source_id.in_(olds)).values(source_id=source.id))
        session.execute(delete(Source).where(Source.id.in_(olds)))


def open_source(db: Database, uri: str, kind: str, acl: AclManifest | None) -> tuple[int, AclManifest]:
    """The source at `uri` (created with `kind` when new) and the manifest a sync applies: `acl` when
    given, stored with the source; else the one stored before; else the default (everyone), stored.

    Returns:
        `(source ID, manifest)`.
    """
    manifest = acl or AclManifest()
    with db.session() as session:
        source = session.scalar(select(Source).where(Source.uri == uri))
        if source is None:
            source = Source(kind=kind, uri=uri)
            session.add(source)
            session.flush()
        if acl is not None or source.acl_manifest is None:
            source.acl_manifest = manifest.to_dict()
        else:
            manifest = AclManifest.from_dict(source.acl_manifest)
        return source.id, manifest
