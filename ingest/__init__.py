"""Ingestion: sources -> parsed documents -> chunks -> embeddings -> Qdrant points (with each ACL)."""
