"""Cross-encoder reranking (sentence-transformers `CrossEncoder`) from a local model folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from assistant.core.errors import ConfigError
from assistant.core.passages import passage_text

if TYPE_CHECKING:
    from assistant.retrieval.retriever import RetrievedChunk


class Reranker:
    """Re-scores (question, chunk) pairs jointly; slower than the bi-encoder but more precise.

    Args:
        model_path: local CrossEncoder folder (e.g. bge-reranker-v2-m3); nothing is downloaded.
        batch_size: pairs per forward pass.
    """

    def __init__(self, model_path: Path, *, batch_size: int = 16):
        from sentence_transformers import CrossEncoder

        if not Path(model_path).is_dir():
            raise ConfigError(f"ASSISTANT_RERANKER_MODEL={str(model_path)!r} is not a local model folder")
        self.model = CrossEncoder(str(model_path), device="cpu", local_files_only=True)
        self.batch_size = batch_size

    def rerank(self, query: str, chunks: list["RetrievedChunk"]) -> list["RetrievedChunk"]:
        """Chunks sorted by cross-encoder score (stored in `score`), best first.

        Each chunk is scored as ingestion embedded it: title and heading path, then its text
        (`passages.passage_text`); the model truncates the pair to its own maximum length.
        """
        pairs = [(query, passage_text(c.title, c.heading, c.text)) for c in chunks]
        scores = self.model.predict(pairs, batch_size=self.batch_size)
        for chunk, score in zip(chunks, scores):
            chunk.score = float(score)
        return sorted(chunks, key=lambda c: c.score, reverse=True)
