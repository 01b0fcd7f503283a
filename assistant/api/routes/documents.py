"""Document preview and download, for readers the document's ACL admits; everyone else gets not_found."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from assistant.answering.citations import document_route
from assistant.api.audit_origin import request_origin
from assistant.api.deps import DatabaseDep, PrincipalDep
from assistant.api.schemas.documents import DocumentMetaPublic
from assistant.auth.access import read_original
from assistant.compliance.audit import record_event
from assistant.core.db.documents import readable_document

router = APIRouter(prefix="/api/documents", tags=["documents"])


@router.get("/{doc_id}", response_model=DocumentMetaPublic)
async def get_document(doc_id: str, principal: PrincipalDep, db: DatabaseDep) -> DocumentMetaPublic:
    """Metadata of a document the caller may open (its source-relative path and content route, never
    the server's path).

    Raises:
        NotFoundError: unknown, deleted, or not readable by the caller (the same answer for each).
    """
    doc = await run_in_threadpool(readable_document, db, doc_id, principal=principal)
    return DocumentMetaPublic(
        id=doc.id, source=doc.source, route=document_route(doc.id), title=doc.title, mime=doc.mime,
        size_bytes=doc.size_bytes, page_count=doc.page_count, chunk_count=doc.chunk_count, updated_at=doc.updated_at,
    )


def download_name(name: str) -> str:
    """File `name` as offered for download. A name read from disk whose bytes are not UTF-8 (lone
    surrogates from `surrogateescape`) is decoded as Windows-1252, which is what such names nearly always
    are (Latin-1 written by Windows tools or old archives; `caf\\xe9.txt` -> `café.txt`), or as Latin-1
    where a byte is undefined in Windows-1252; a valid UTF-8 name is returned unchanged."""
    raw = name.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            return raw.decode("cp1252")
        except UnicodeDecodeError:
            return raw.decode("latin-1")


def attachment_disposition(name: str) -> str:
    """The `Content-Disposition` value that offers file `name` for download (RFC 6266 `filename*`,
    percent-encoded UTF-8 of `download_name(name)`)."""
    return f"attachment; filename*=utf-8''{quote(download_name(name), safe='')}"


@router.get("/{doc_id}/content")
async def get_document_content(doc_id: str, principal: PrincipalDep, db: DatabaseDep, request: Request) -> Response:
    """The original file, as an attachment, exactly as it was indexed (see `read_original`).

    Sent with `Content-Security-Policy: sandbox` and `nosniff` so that an HTML or SVG document cannot run
    script in the app's origin with the reader's session.

    Raises:
        NotFoundError: as for the metadata, or the file is no longer at its source as it was indexed.
    """
    doc, content = await run_in_threadpool(read_original, db, doc_id, principal=principal)
    await run_in_threadpool(
        record_event, db, principal=principal, action="document.read", doc_ids=[doc.id],
        details={"doc_id": doc.id, "source": doc.source}, **request_origin(request),
    )
    return Response(
        content,
        media_type=doc.mime or "application/octet-stream",
        headers={
            "Content-Disposition": attachment_disposition(doc.local_path.name),
            "Content-Security-Policy": "sandbox",
            "X-Content-Type-Options": "nosniff",
        },
    )
