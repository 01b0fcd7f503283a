"""Cross-encoder reranking (sentence-transformers `CrossEncoder`) from a local model folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.core.errors import ConfigError
from assistant.core.passages import passage_text

if TYPE_CHECKING:
    from assistant.retrieval.retriever import RetrievedChunk


def check_cross_encoder_folder(folder: Path) -> None:
    """Refuse a folder that does not hold a cross-encoder: a sequence-classification model
    (`*ForSequenceClassification` in its config.json `architectures`, as sentence-transformers saves
    a CrossEncoder). A bi-encoder (all-MiniLM-L6-v2) would load with a new, untrained head and
    rerank at random.

    Raises:
        ConfigError: naming the folder and what is missing.
    """
    name = f"ASSISTANT_RERANKER_MODEL={str(folder)!r}"
    if not folder.is_dir():
        raise ConfigError(f"{name} is not a local model folder")
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{name} holds no config.json: it is not a model folder") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{name}: config.json is not readable JSON ({exc})") from exc
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if not any(str(a).endswith("ForSequenceClassification") for a in architectures or ()):
        raise ConfigError(
            f"{name} is not a cross-encoder: its architectures are {architectures or 'not given'}, "
            "not a sequence-classification model (a bi-encoder such as all-MiniLM-L6-v2 would rerank at random)"
        )


class Reranker:
    """Re-scores (question, chunk) pairs jointly; slower than the bi-encoder but more precise.

    Args:
        model_path: local CrossEncoder folder (e.g. bge-reranker-v2-m3); nothing is downloaded.
        batch_size: pairs per forward pass.
    """

    def __init__(self, model_path: Path, *, batch_size: int = 16):
        from sentence_transformers import CrossEncoder

        check_cross_encoder_folder(Path(model_path))
        try:
            self.model = CrossEncoder(str(model_path), device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"ASSISTANT_RERANKER_MODEL={str(model_path)!r} could not be loaded: {exc}") from exc
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
