"""A document's metadata as readers get it (`assistant.api.routes.documents`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class DocumentMetaPublic(BaseModel):
    """A document's metadata as readers get it: `source` is its path relative to its source folder and
    `route` the API route of its content; the server's own path (the `file://` URI) is not sent."""

    id: str
    source: str
    route: str
    title: str
    mime: str
    size_bytes: int
    page_count: int | None
    chunk_count: int
    updated_at: datetime | None
