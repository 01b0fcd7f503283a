"""Query embeddings batched across threads equal the one-at-a-time embeddings of the real model."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from assistant.retrieval.query_batcher import QueryBatcher
from tests.conftest import shared_embedder

QUESTIONS = [f"How long should password number {i} be?" for i in range(24)] + ["密码应该多长？", "x"]


def test_concurrent_questions_share_batches_and_get_their_own_vectors():
    embedder = shared_embedder()
    batcher = QueryBatcher(embedder, max_batch=8)
    with ThreadPoolExecutor(16) as pool:
        vectors = list(pool.map(batcher.embed_query, QUESTIONS))
    for question, vector in zip(QUESTIONS, vectors):
        assert vector.dtype == np.float32 and vector.shape == (embedder.dim,)
        assert np.allclose(vector, embedder.embed_query(question), atol=1e-5)
    assert batcher.queries == len(QUESTIONS) and batcher.batches < len(QUESTIONS)
    assert batcher.name == embedder.name  # the model's identity is the embedder's


def test_an_error_reaches_every_caller_of_the_batch():
    class Broken:
        name = "broken"

        def embed_query(self, text):
            raise ValueError(f"cannot embed {text!r}")

    batcher = QueryBatcher(Broken())
    try:
        batcher.embed_query("q")
    except ValueError as exc:
        assert "cannot embed 'q'" in str(exc)
    else:
        raise AssertionError("the error was swallowed")
