"""Builds the configured LLM backend."""

from __future__ import annotations

from assistant.core.llm.base import LLM
from assistant.core.llm.model_files import configured_gguf_path
from assistant.core.settings import Settings


def open_llm(settings: Settings) -> LLM:
    """The `llama_cpp` (in-process) or `openai` (HTTP, vLLM) backend, as configured.

    Raises:
        ConfigError: llama_cpp's GGUF is missing, or a built-in model's parts do not assemble into
            the published file (see `model_files`).
    """
    if settings.llm.backend == "openai":
        from assistant.core.llm.openai_compat import OpenAICompatLLM  # noqa: PLC0415 - openai: ~1 s, only with that backend

        return OpenAICompatLLM.from_settings(settings)
    # Importing it sets OMP_WAIT_POLICY for llama.cpp's OpenMP threads: only in processes that run it.
    from assistant.core.llm.llama_cpp import LlamaCppLLM  # noqa: PLC0415 - sets OMP_WAIT_POLICY (above)

    return LlamaCppLLM(
        configured_gguf_path(settings), context_tokens=settings.llm.context_tokens, threads=settings.threads,
        window_tokens=settings.llm.cpu_window_tokens or None,
    )
