"""LLM clients: llama.cpp in-process (embedded default) and any OpenAI-compatible server (vLLM)."""

from assistant.core.llm.base import LLM, ChatMessage, FinishReason, StreamResult, Usage
from assistant.core.llm.factory import open_llm

__all__ = ["LLM", "ChatMessage", "FinishReason", "StreamResult", "Usage", "open_llm"]
