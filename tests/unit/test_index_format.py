"""The index format stays readable by every collection written so far: point IDs, payload keys, vectors."""

from assistant.core.index import sparse
from assistant.core.index.payload import ChunkPayload, chunk_id, chunk_point, document_id

# Keys of a chunk's payload in the order ingestion has always written them; a collection built by an
# earlier release holds exactly these.
# `ocr` was added by issue 19 (text recognised in a scan); points written before it read as False.
STORED_KEYS = ["doc_id", "chunk_index", "text", "title", "heading", "page", "source", "uri", "acl", "lang", "content_hash", "ocr"]


def _payload() -> ChunkPayload:
    doc = document_id("file:///srv/handbook/leave.md")
    return ChunkPayload(
        doc_id=doc, chunk_index=3, text="Annual leave is 25 days.", title="Leave", heading="Leave > Annual",
        page=None, source="leave.md", uri="file:///srv/handbook/leave.md", acl=["group:staff"], lang="en",
        content_hash="ab" * 32,
    )


def test_point_ids_are_those_of_existing_collections():
    # Values computed by the ID rules that wrote the existing collections: a change here means a reindex.
    doc = document_id("file:///srv/handbook/leave.md")
    assert doc == "38997be0-e55a-59e1-bc23-32704f769901"
    assert chunk_id(doc, 3, "Annual leave is 25 days.") == "7f257a77-bdee-5226-b7f3-568fb57d7146"
    assert document_id("file:///srv/mail/note.eml#fake-attachment.txt") == "ba40d49d-00a3-5b3f-8082-53e0082a55a6"


def test_payload_is_stored_under_the_same_keys_and_reads_back():
    payload = _payload()
    stored = payload.to_stored()
    assert list(stored) == STORED_KEYS
    assert stored["chunk_index"] == 3 and stored["page"] is None and stored["acl"] == ["group:staff"]
    assert ChunkPayload.from_stored(stored) == payload


def test_payload_missing_keys_read_as_empty():
    read = ChunkPayload.from_stored({"doc_id": "d", "text": "t"})
    assert (read.chunk_index, read.title, read.heading, read.page, read.lang, read.acl, read.ocr) == (0, "", "", None, "", [], False)
    assert read.evidence_text() == "  t"


def test_chunk_point_carries_id_sparse_vector_of_the_passage_and_payload():
    payload = _payload()
    passage = "Leave — Annual\nAnnual leave is 25 days."
    point = chunk_point(payload, dense=[0.5, 0.5], passage=passage)
    assert point.id == "7f257a77-bdee-5226-b7f3-568fb57d7146"
    assert point.sparse == sparse.encode_document(passage)
    assert point.sparse != sparse.encode_document(payload.text)
    assert point.payload == payload.to_stored() and list(point.dense) == [0.5, 0.5]
