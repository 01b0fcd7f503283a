"""Masks personal data in a parsed document's chunks before they are embedded and stored, for sources
whose ACL manifest asks for it (`mask_pii`); the original file is untouched and served by its ACL."""

from __future__ import annotations

import dataclasses
from collections import Counter

from assistant.auth.acl_manifest import AclManifest
from assistant.compliance.pii import mask_pii
from assistant.core.db.session import Database
from assistant.core.db.sources import list_sources
from ingest.isolated_parse import ParseResult


def stored_pii_kinds(db: Database, source_uri: str) -> tuple[str, ...] | None:
    """What the source at `source_uri` masked until now (its stored manifest's `mask_pii`); None for a
    source not registered yet. Read before a sync stores a new manifest: when the two differ, every
    file is parsed again, so that turning masking on also masks what is already indexed."""
    for source in list_sources(db):
        if source.uri == source_uri:
            return AclManifest.from_dict(source.acl_manifest).mask_pii if source.acl_manifest else ()
    return None


def mask_parse_result(result: ParseResult, kinds: tuple[str, ...], counts: Counter) -> None:
    """Replace personal data of `kinds` in `result`'s title and in each chunk's text, embedded text and
    heading (`assistant.compliance.pii.mask_pii`), in place; add the spans masked in the shown text (and
    the title) to `counts` per kind (the embedded text repeats them, so it is not counted again)."""

    def masked(text: str, *, count: bool) -> str:
        found = mask_pii(text, kinds=kinds)
        if count:
            counts.update({k: n for k, n in found.counts.items() if n})
        return found.text

    result.title = masked(result.title, count=True)
    result.chunks = [
        dataclasses.replace(
            chunk, text=masked(chunk.text, count=True), embed_text=masked(chunk.embed_text, count=False),
            heading=masked(chunk.heading, count=False),
        )
        for chunk in result.chunks
    ]
