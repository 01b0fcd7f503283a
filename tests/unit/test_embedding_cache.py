"""The ingestion embedding cache returns what it stored, per model, and stays within its bound."""

import numpy as np

from ingest.embedding_cache import EmbeddingCache


def test_vectors_come_back_per_model_and_the_oldest_go_first(tmp_path):
    path = tmp_path / "cache.sqlite"
    cache = EmbeddingCache(path, model="m", dim=4, max_vectors=10)
    keys = [cache.key(f"text {i}") for i in range(25)]
    for start in range(0, 25, 5):  # five insertions of five
        cache.put_many([(k, np.full(4, i, dtype=np.float32)) for i, k in enumerate(keys[start:start + 5], start)])
    assert len(cache) == 10
    found = cache.get_many(keys)
    assert sorted(found) == sorted(keys[15:])  # the newest ten
    assert all(found[k][0] == i for i, k in enumerate(keys[15:], 15))
    cache.close()
    other = EmbeddingCache(path, model="other", dim=4, max_vectors=10)
    assert other.get_many([other.key("text 20")]) == {}  # another model never gets these vectors
    other.close()
