"""What every part of the product shares: settings, errors, SQL, principals, Qdrant, embedder, LLM, jobs."""
