"""Retrieval: ACL-filtered hybrid search in Qdrant, optional reranking, context packing."""

from assistant.retrieval.retriever import RetrievedChunk, Retrieval, Retriever  # noqa: F401
