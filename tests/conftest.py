"""Shared fixtures: isolated settings per test, a session-wide index of the real corpus, PostgreSQL."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Converted and exported models (e5 int8, question-embedding graphs) depend on the model only: one cache
# serves the whole session, in-process and in the servers that tests start as subprocesses. `make install`
# already converted e5 into the checkout's var/models: reuse it (the conversion takes a minute and 3 GB).
_INSTALLED_MODELS = Path(__file__).resolve().parents[1] / "var" / "models"
os.environ.setdefault(
    "ASSISTANT_MODEL_CACHE_DIR",
    str(_INSTALLED_MODELS) if _INSTALLED_MODELS.is_dir() else tempfile.mkdtemp(prefix="assistant-test-models-"),
)
# The mechanics tests (streaming, stops, cancellation, ACLs) run on SmolLM2-135M, a supported choice
# that answers in a second; tests/service/test_builtin_chat_model.py loads the shipped default.
os.environ.setdefault("ASSISTANT_LLM_MODEL", "smollm2")
# SmolLM2-135M and the stand-in servers cannot translate: Chinese questions are searched as asked
# here, and the translation (ASSISTANT_QUESTION_TRANSLATION) is tested with the shipped model.
os.environ.setdefault("ASSISTANT_QUESTION_TRANSLATION", "false")

from assistant.core import resources as resources_mod  # noqa: E402
from assistant.core.resources import Resources  # noqa: E402
from assistant.core.settings import Settings  # noqa: E402
from tests.corpus import DOCS_ZH, HANDBOOK  # noqa: E402

PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def make_settings(data_dir: Path, **overrides) -> Settings:
    """Settings confined to `data_dir`, ignoring the developer's environment and .env file."""
    return Settings(_env_file=None, data_dir=data_dir, **overrides)


@pytest.fixture(scope="session")
def citing_model() -> Iterator[dict]:
    """A model server that copies and cites (`tests.standin_openai.extractive_answer`), as settings
    overrides for the `openai` backend: for the tests of the answering mechanics that need a cited
    answer (SmolLM2-135M's answers are mostly unsupported, and grounding rightly declines them; the
    shipped model is tested on its own, tests/service/test_builtin_chat_model.py)."""
    from tests.standin_openai import ScriptedOpenAIServer, extractive_answer

    with ScriptedOpenAIServer(extractive_answer, usage=None) as server:
        yield {"llm_backend": "openai", "openai_base_url": server.base_url, "openai_model": "assistant",
               "query_rewrite": "rules"}


@pytest.fixture
def tmp_settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "var")


@pytest.fixture
def tmp_resources(tmp_settings: Settings) -> Iterator[Resources]:
    res = Resources.open(tmp_settings)
    yield res
    res.close()


_EMBEDDER = {}
# The model of the session-wide corpus index and of the tests that assert its retrieval figures:
# MiniLM ingests the 9,213 chunks about three times faster than multilingual-e5-small (the default);
# e5 is tested on small indexes of its own (tests/service/test_e5_onnx.py, test_retrieval_quality.py).
CORPUS_MODEL = "builtin:all-MiniLM-L6-v2"


def shared_embedder(model: str = CORPUS_MODEL):
    """One embedding model of each kind per test session (loading one costs seconds; it holds no
    state). multilingual-e5-small is converted once per session, into ASSISTANT_MODEL_CACHE_DIR."""
    if model not in _EMBEDDER:
        from assistant.core.embedding.embedder import Embedder

        _EMBEDDER[model] = Embedder(model)
    return _EMBEDDER[model]


def open_resources(settings: Settings) -> Resources:
    """Resources for `settings` that reuse the session's embedder for a built-in model."""
    from assistant.core.embedding.embedder import BUILTIN_MODELS

    res = Resources.open(settings)
    if settings.embedding.model in BUILTIN_MODELS:
        res._embedder = shared_embedder(settings.embedding.model)
    return res


@pytest.fixture(scope="session")
def corpus_index(tmp_path_factory, citing_model) -> Iterator[Resources]:
    """The handbook and the Chinese docs, ingested once for the whole session with `CORPUS_MODEL`
    (Qdrant Edge, SQLite). Answers are packed into the model's whole context, as before the CPU window
    (`llm_cpu_window_tokens`) existed: the tests that ask expect the answering file among the sources
    given, which a CPU window often leaves out. Its model is `citing_model`."""
    from ingest.pipeline import Ingestor

    settings = make_settings(
        tmp_path_factory.mktemp("corpus") / "var", embedding_model=CORPUS_MODEL, llm_cpu_window_tokens=0,
        **citing_model,
    )
    res = open_resources(settings)
    ingestor = Ingestor(res)
    for root in (HANDBOOK, DOCS_ZH):
        outcomes = ingestor.sync(root)
        failed = [o for o in outcomes if o.status == "failed"]
        assert not failed, failed[:5]
    resources_mod.set_current(res)
    yield res
    resources_mod.set_current(None)
    res.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, uniquely named PostgreSQL database; dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"assistant_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def copy_subset(src: Path, dst: Path, relative_paths: list[str]) -> Path:
    """Copy some corpus files into a scratch folder (to mutate them); returns `dst`."""
    for rel in relative_paths:
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
    return dst
