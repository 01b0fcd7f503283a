"""Cross-encoder reranking: a sentence-transformers `CrossEncoder` from a local model folder, or a
reranking server's HTTP endpoint (`EndpointReranker`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.core.errors import ConfigError
from assistant.core.passages import passage_text

if TYPE_CHECKING:
    from assistant.retrieval.retriever import RetrievedChunk

log = logging.getLogger(__name__)


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


class EndpointReranker:
    """Re-scores (question, chunk) pairs with a cross-encoder served over HTTP, such as a multilingual
    one a company provisions (bge-reranker-v2-m3 behind `vllm serve --task score`, or llama.cpp's
    server started with `--reranking`): no multilingual cross-encoder ships in a package here.

    Speaks the rerank API those servers share with Jina and Cohere (vLLM docs, "Re-rank API"):
    `POST {url}` with `{"model", "query", "documents", "top_n"}`, answered by `{"results": [{"index",
    "relevance_score"}, ...]}`. A failed or malformed call leaves the chunks in their fused order
    (logged): reranking refines a ranking, it is never the reason a search fails.

    Args:
        url: the endpoint, e.g. `http://reranker:8000/rerank` or `http://llama:8080/v1/rerank`.
        model: the served model's name ("" when the server serves one model).
        api_key: sent as a bearer token when given.
        timeout_s: seconds allowed for one call.
        max_chunks: chunks sent (the fused order's first); the rest follow them unchanged.
    """

    def __init__(self, url: str, *, model: str = "", api_key: str | None = None, timeout_s: float = 5.0,
                 max_chunks: int = 20):
        import httpx

        self.url = str(url)
        self.model = model
        self.max_chunks = max_chunks
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def rerank(self, query: str, chunks: list["RetrievedChunk"]) -> list["RetrievedChunk"]:
        """The first `max_chunks` chunks sorted by the endpoint's relevance score (stored in `score`),
        best first, then the others in their order; each chunk is sent as ingestion embedded it
        (`passages.passage_text`). Unchanged when the call fails."""
        head, tail = chunks[: self.max_chunks], chunks[self.max_chunks :]
        if not head:
            return chunks
        body = {"query": query, "documents": [passage_text(c.title, c.heading, c.text) for c in head], "top_n": len(head)}
        if self.model:
            body["model"] = self.model
        try:
            response = self._client.post(self.url, json=body)
            response.raise_for_status()
            scores = {int(r["index"]): float(r["relevance_score"]) for r in response.json()["results"]}
            if set(scores) != set(range(len(head))):
                raise ValueError(f"scores for {len(scores)} of {len(head)} documents")
        except Exception as exc:  # noqa: BLE001 - any failure keeps the fused order
            log.warning("reranker endpoint %s failed, keeping the fused order: %s: %s", self.url, type(exc).__name__, exc)
            return chunks
        for n, chunk in enumerate(head):
            chunk.score = scores[n]
        return sorted(head, key=lambda c: c.score, reverse=True) + tail

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()
