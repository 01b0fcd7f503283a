"""Changing the default embedding model does not break an index built with the old default."""

from __future__ import annotations

import pytest

from assistant.core.embedding.embedder import BUILTIN_E5, BUILTIN_MINILM
from assistant.core.errors import ConfigError
from assistant.core.settings import Settings
from assistant.core.vectorstore.factory import open_vector_store
from tests.conftest import make_settings


def test_an_index_built_with_minilm_is_served_with_minilm_while_the_model_is_unset(tmp_path):
    assert Settings.flat_fields()["embedding_model"].default == BUILTIN_E5
    store = open_vector_store(make_settings(tmp_path / "var", embedding_model=BUILTIN_MINILM))
    store.ensure_collection(384)
    store.close()

    default = make_settings(tmp_path / "var")
    store = open_vector_store(default)
    try:
        assert store.model == BUILTIN_MINILM
        assert default.embedding.model == BUILTIN_MINILM  # so questions are embedded with MiniLM too
    finally:
        store.close()
    # A model set explicitly still has to match the index: `assistant reindex` moves it.
    with pytest.raises(ConfigError, match="assistant reindex"):
        open_vector_store(make_settings(tmp_path / "var", embedding_model=BUILTIN_E5))
