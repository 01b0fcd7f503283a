"""LLM clients: llama.cpp in-process (embedded default) and any OpenAI-compatible server (vLLM)."""

from assistant.core.llm.base import LLM, ChatMessage  # noqa: F401
from assistant.core.llm.factory import open_llm  # noqa: F401
