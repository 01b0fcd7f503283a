"""Retrieval: ACL-filtered hybrid search in Qdrant, optional reranking, context packing."""

from assistant.retrieval.retriever import Retrieval, RetrievedChunk, Retriever  # noqa: F401
