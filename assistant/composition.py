"""Wires the process's resources into the retriever and answerer that the API and CLI share."""

from __future__ import annotations

from dataclasses import dataclass

from assistant.adapters.routing import AdapterRouter, local_adapter, remote_adapter
from assistant.adapters.store import serving_adapters
from assistant.answering import Answerer
from assistant.answering.admission import FairLimiter
from assistant.answering.cache import AnswerCache, MemoryStore, RedisStore, index_version
from assistant.answering.prompt import SYSTEM_PROMPT
from assistant.answering.request import GenerationParams
from assistant.core.db.documents import readable_versions
from assistant.core.llm.deferred import DeferredLLM
from assistant.core.resources import Resources
from assistant.retrieval import Retriever, crosslingual
from assistant.retrieval.abstention import AbstentionRule
from assistant.retrieval.query_batcher import QueryBatcher
from assistant.retrieval.reranker import BUILTIN_RERANKER_LANGUAGES, BuiltinReranker, EndpointReranker, Reranker
from assistant.retrieval.retriever import default_interleave_depth


@dataclass
class Assistant:
    """The composed product for one process."""

    resources: Resources
    retriever: Retriever
    answerer: Answerer

    @classmethod
    def build(cls, resources: Resources) -> Assistant:
        """Build retriever and answerer from `resources` (models load lazily on first use)."""
        settings = resources.settings
        reranker = None
        if settings.reranking.model:
            reranker = Reranker(settings.reranking.model)
        elif settings.reranking.url:
            key = settings.reranking.url_api_key
            reranker = EndpointReranker(settings.reranking.url, model=settings.reranking.url_model,
                                        api_key=key.get_secret_value() if key else None,
                                        timeout_s=settings.reranking.timeout_s)
        elif settings.reranking.mode != "off":
            reranker = BuiltinReranker(languages=BUILTIN_RERANKER_LANGUAGES[settings.reranking.mode])
        # What was measured for the embedding model (interleaving, abstention) is looked up by its
        # configured name, the one the index was built with.
        embedding_model = settings.embedding.model
        depth = settings.retrieval.interleave_depth
        if depth is None:
            depth = default_interleave_depth(embedding_model)
        retriever = Retriever(
            store=resources.store, embedder=QueryBatcher(resources.embedder), reranker=reranker, prefetch_k=settings.retrieval.prefetch_k,
            fusion=settings.retrieval.fusion, interleave_depth=depth, translate=_translator() if settings.retrieval.query_translation else None,
            chunks_per_document=settings.retrieval.chunks_per_document,
            chunk_tie_margin=settings.retrieval.chunk_tie_margin,
        )
        answerer = Answerer(
            retriever=retriever,
            llm=adapter_router(resources),
            top_k=settings.retrieval.top_k,
            abstention=AbstentionRule.for_model(embedding_model, min_relevance=settings.retrieval.min_relevance),
            defaults=GenerationParams.from_settings(settings),
            limiter=FairLimiter.from_settings(settings),
            cache=_answer_cache(resources),
            rewrite=settings.retrieval.query_rewrite if settings.retrieval.query_rewrite != "auto"
            else ("llm" if settings.llm.backend == "openai" else "rules"),
            source_tokens=settings.llm.cpu_source_tokens or None if settings.llm.backend == "llama_cpp" else None,
            translate_questions=settings.retrieval.question_translation,
            translate_timeout_s=settings.retrieval.question_translation_timeout_s,
            tables_dir=settings.tables_dir,
        )
        return cls(resources=resources, retriever=retriever, answerer=answerer)


def adapter_router(resources: Resources) -> AdapterRouter:
    """The served model (opened on first use: search-only processes never load it) behind the router
    that sends each reader to the live or canary LoRA adapter of their audience (`finetune`)."""
    settings = resources.settings
    base = DeferredLLM(lambda: resources.llm)
    open_adapter = remote_adapter(base) if settings.llm.backend == "openai" else local_adapter(base)
    return AdapterRouter(base, adapters=lambda: serving_adapters(resources.db), open_adapter=open_adapter,
                         canary_share=settings.finetune.canary_share)


def _translator():
    crosslingual.preload()
    return crosslingual.translate


def _answer_cache(resources: Resources) -> AnswerCache | None:
    """The answer cache configured by `ASSISTANT_ANSWER_CACHE_*` (Redis when a URL is set), or None."""
    settings = resources.settings
    if not settings.answer_cache.entries:
        return None
    store = (
        RedisStore(settings.answer_cache.redis_url) if settings.answer_cache.redis_url
        else MemoryStore(settings.answer_cache.entries)
    )
    version = index_version(
        SYSTEM_PROMPT, settings.storage.collection, settings.embedding.model, settings.llm.backend, settings.llm.openai_model,
        settings.llm.model, settings.llm.model_path, settings.retrieval.top_k, settings.llm.max_tokens, settings.llm.temperature,
    )
    return AnswerCache(
        store, versions=lambda ids, principal: readable_versions(resources.db, ids, principal=principal),
        index_version=version, ttl_s=settings.answer_cache.ttl_s,
    )
