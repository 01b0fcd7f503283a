"""LoRA adapters served by the llama.cpp backend itself (the embedded default): the one base GGUF in
memory, each adapter's GGUF LoRA (`adapter.gguf`, written by the refresh) loaded once and applied to
the generations routed to it. Nothing here imports transformers or peft."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from assistant.adapters.gguf_lora import GGUF_ADAPTER_FILE
from assistant.core.llm.base import LLM, ChatMessage, StreamResult
from assistant.core.llm.llama_cpp import LlamaCppLLM

__all__ = ["GGUF_ADAPTER_FILE", "LlamaLoraLLM"]


class LlamaLoraLLM(LLM):
    """The `LLM` of one adapter on a `LlamaCppLLM` base: its generations run on the base with the
    adapter set on the context (`LlamaCppLLM.stream(lora=...)`); name, window and tokenizer are the base's.

    Args:
        base: the served llama.cpp model.
        folder: the adapter's folder, holding `adapter.gguf`.
        name: the adapter's name (reported as this model's name).

    Raises:
        ConfigError: the folder has no `adapter.gguf` llama.cpp can load onto `base`.
    """

    def __init__(self, base: LlamaCppLLM, folder: str | Path, *, name: str):
        self.base = base
        self.name = name
        self.context_tokens = base.context_tokens
        self.lora = base.load_lora(Path(folder) / GGUF_ADAPTER_FILE)

    def count_tokens(self, text: str) -> int:
        return self.base.count_tokens(text)

    def stream(self, messages: list[ChatMessage], *, max_tokens: int, temperature: float,
               result: StreamResult | None = None, stop: Sequence[str] = ()) -> AsyncIterator[str]:
        """`LlamaCppLLM.stream` of the base with this adapter applied to this generation only."""
        return self.base.stream(messages, max_tokens=max_tokens, temperature=temperature, result=result, stop=stop,
                                lora=self.lora)
