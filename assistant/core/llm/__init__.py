"""LLM clients: llama.cpp in-process (embedded default) and any OpenAI-compatible server (vLLM)."""

from assistant.core.llm.base import LLM, ChatMessage, FinishReason, StreamResult, Usage  # noqa: F401
from assistant.core.llm.factory import open_llm  # noqa: F401
