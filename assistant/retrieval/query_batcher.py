"""Query embeddings batched across concurrent requests: one forward pass for the questions that arrived together.

Under load each chat embeds its question; one at a time, MiniLM costs ~40 ms of CPU per question on
this class of machine, 16 in one batch ~8 ms each (measured on 2 shared cores). The batcher is
"continuous" in the way servers batch inference (e.g. NVIDIA Triton's dynamic batcher, vLLM's
scheduler) minus the timer: a worker thread embeds whatever questions are waiting when it becomes free,
so a lone question pays no extra latency, and a crowd shares the passes.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

import numpy as np


class QueryBatcher:
    """The question side of an `Embedder`, callable from many threads at once: what `Retriever` needs.

    It offers the model's `name` and `languages`, and question embeddings: `embed_query`, and
    `submit_query`, which returns at once. Passages are embedded by the `Embedder` itself
    (`embedder`), at ingestion.

    Args:
        embedder: an `Embedder`; a batch goes through its `embed_queries` (one forward pass for
            sentence-transformers models, on PyTorch or ONNX Runtime).
        max_batch: most questions per forward pass.
    """

    def __init__(self, embedder, *, max_batch: int = 32):
        self.embedder = embedder
        self.max_batch = max_batch
        self.batches = 0
        self.queries = 0
        self._queue: queue.SimpleQueue[tuple[str, Future]] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._run, name="query-embedding-batcher", daemon=True)
        self._worker.start()

    def embed_query(self, text: str) -> np.ndarray:
        """The question's embedding, `(dim,) float32`, normalised; blocks until its batch is done.

        Raises:
            Exception: whatever the embedding model raised for the batch.
        """
        return self.submit_query(text).result()

    def submit_query(self, text: str) -> Future:
        """Queue the question and return at once: a future of its embedding (`embed_query`'s result),
        so that the caller can do other work (keyword encoding, translation) while the model runs."""
        future: Future = Future()
        self._queue.put((text, future))
        return future

    @property
    def name(self) -> str:
        """The embedding model's name (`ASSISTANT_EMBEDDING_MODEL`)."""
        return self.embedder.name

    @property
    def languages(self) -> frozenset[str] | None:
        """Languages the model embeds meaningfully; None: any (see `Embedder.languages`)."""
        return self.embedder.languages

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                vectors = self._embed([text for text, _ in batch])
            except Exception as exc:  # every caller of the batch gets the error
                for _, future in batch:
                    future.set_exception(exc)
                continue
            self.batches += 1
            self.queries += len(batch)
            for (_, future), vector in zip(batch, vectors):
                future.set_result(vector)

    def _embed(self, texts: list[str]) -> list[np.ndarray]:
        if len(texts) == 1:  # a lone question: `embed_query` is all an embedder must offer
            return [self.embedder.embed_query(texts[0])]
        return list(self.embedder.embed_queries(texts))
