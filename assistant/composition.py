"""Wires the process's resources into the retriever and answerer that the API and CLI share."""

from __future__ import annotations

from dataclasses import dataclass

from assistant.answering import Answerer
from assistant.core.resources import Resources
from assistant.retrieval import Retriever


@dataclass
class Assistant:
    """The composed product for one process."""

    resources: Resources
    retriever: Retriever
    answerer: Answerer

    @classmethod
    def build(cls, resources: Resources) -> "Assistant":
        """Build retriever and answerer from `resources` (models load lazily on first use)."""
        settings = resources.settings
        reranker = None
        if settings.reranker_model:
            from assistant.retrieval.reranker import Reranker

            reranker = Reranker(settings.reranker_model)
        retriever = Retriever(
            store=resources.store, embedder=resources.embedder, reranker=reranker, prefetch_k=settings.prefetch_k
        )
        answerer = Answerer(
            retriever=retriever,
            llm=_LazyLLM(resources),
            top_k=settings.top_k,
            min_relevance=settings.min_relevance,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
        )
        return cls(resources=resources, retriever=retriever, answerer=answerer)


class _LazyLLM:
    """Defers loading the LLM until the first answer (search-only processes never load it)."""

    def __init__(self, resources: Resources):
        self._resources = resources

    def __getattr__(self, name: str):
        return getattr(self._resources.llm, name)
