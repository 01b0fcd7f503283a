"""Builds the configured LLM backend."""

from __future__ import annotations

from assistant.core.llm.base import LLM
from assistant.core.settings import Settings


def open_llm(settings: Settings) -> LLM:
    """The `llama_cpp` (in-process) or `openai` (HTTP, vLLM) backend, as configured."""
    if settings.llm_backend == "openai":
        from assistant.core.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM.from_settings(settings)
    from assistant.core.llm.llama_cpp import LlamaCppLLM

    return LlamaCppLLM(
        settings.llm_model_path, context_tokens=settings.llm_context_tokens, threads=settings.threads
    )
