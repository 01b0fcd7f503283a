"""How a question finds its documents: hybrid search, translation, follow-ups, abstention."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class RetrievalSettings(BaseModel):
    """How a question finds its documents: hybrid search, translation, follow-ups, abstention.

    Each field is read from its flat `ASSISTANT_*` variable (`env_names.ENV_FIELDS`).
    """

    top_k: int = Field(default=5, ge=1, le=50, description="documents retrieved per question")
    chunks_per_document: int = Field(
        default=1, ge=1, le=10,
        description="most chunks of one document among the retrieved, grouped at its best chunk's place "
        "(results list distinct documents; retrieval/retriever.py, group_by_document)",
    )
    prefetch_k: int = Field(default=40, ge=1, le=1000)
    fusion: Literal["dbsf", "rrf"] = Field(
        default="dbsf", description="how hybrid search fuses its dense and sparse lists (measured in docs/benchmarks.md)"
    )
    interleave_depth: int | None = Field(
        default=None, ge=0, le=50,
        description="first positions of a hybrid result filled by interleaving the fused leader with the best "
        "chunks of the keyword and dense rankings, in turns keyword, dense, keyword (0: fused order only; "
        "unset: the embedding model's measured depth, 5 for the built-in MiniLM and 0 otherwise; "
        "measured in docs/benchmarks.md)",
    )
    query_translation: bool = Field(
        default=True,
        description="translate questions between Chinese and English with CC-CEDICT for keyword search "
        "(finds pages in the other language; measured in docs/benchmarks.md)",
    )
    min_relevance: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="dense cosine below which a chunk is no evidence that the documents answer (unset: the "
        "embedding model's calibrated floor, 0.25 for the built-in MiniLM; see retrieval/abstention.py)",
    )
    question_translation: bool = Field(
        default=True,
        description="the chat model translates a Chinese question into English before retrieval, and the "
        "question is searched with its translation (finds English pages that the Chinese question alone "
        "misses; measured in docs/benchmarks.md, about 1 s of CPU time a Chinese question on the embedded default)",
    )
    question_translation_timeout_s: float = Field(
        default=15.0, gt=0,
        description="longest wait for the translation, in seconds (it delays the answer's first token by as "
        "much); a slower one is given up and the question searched alone. About 1.2 s (p50) and 1.8 s (p95) "
        "on 2 quiet cores; 15 s keeps it on a loaded machine, where a 6 s limit dropped every translation of a "
        "fresh-user trial and the English pages were not found",
    )
    query_rewrite: Literal["auto", "llm", "rules"] = Field(
        default="auto", description="how follow-ups become standalone queries; auto = llm with the openai backend"
    )
