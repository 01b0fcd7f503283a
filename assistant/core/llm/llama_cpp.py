"""llama.cpp in-process (llama-cpp-python): the CPU default, with a built-in GGUF (core/llm/model_files.py)."""

from __future__ import annotations

import os

# llama.cpp's CPU backend is built with OpenMP, whose threads busy-wait between parallel regions by default:
# on cores shared with the web server, the embedder and other processes that spinning cut generation
# several-fold (docs/notes/serving-and-ingestion-investigations.md, "The embedded chat model"). libgomp reads
# the policy when llama_cpp's library loads, so this must run before `import llama_cpp`; an operator's own
# setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import asyncio  # noqa: E402
import threading  # noqa: E402
from collections.abc import AsyncIterator, Generator, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any, cast

from assistant.core.errors import ConfigError  # noqa: E402
from assistant.core.llm.base import LLM, ChatMessage, StreamResult, Usage, stop_list  # noqa: E402
from assistant.core.llm.model_files import configured_gguf_path  # noqa: E402
from assistant.core.settings import get_settings  # noqa: E402

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from llama_cpp import ChatCompletionRequestMessage, CreateChatCompletionStreamResponse, LlamaState


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one model family (the temperature comes with each request)."""

    repeat_penalty: float
    top_p: float
    top_k: int


# By GGUF `general.architecture`. Qwen2.5's own generation config samples with top_p 0.8, top_k 20 and
# a repetition penalty of 1.05-1.1; a firmer penalty makes it avoid the sources' own words and numbers.
# SmolLM2-135M loops on a phrase without a firmer penalty than llama.cpp's default of 1.1.
SAMPLING = {"qwen2": Sampling(repeat_penalty=1.1, top_p=0.8, top_k=20)}
DEFAULT_SAMPLING = Sampling(repeat_penalty=1.3, top_p=0.95, top_k=40)
# A prompt prefix shared by two consecutive prompts is kept as the stable prefix from this length on
# (Qwen's chat template alone takes 3 tokens; the system prompt ~80).
MIN_STABLE_PREFIX_TOKENS = 16


class LlamaCppLLM(LLM):
    """A GGUF model run by llama.cpp in this process. One generation at a time (the model is not
    re-entrant); others wait their turn.

    The stable start of the prompt (chat template and system prompt) is evaluated once: llama.cpp keeps
    the KV state of the last prompt and evaluates only what follows the longest shared prefix, and the
    KV state of the prefix that consecutive prompts share is saved, so that a different prompt in
    between (another system prompt) does not cost its re-evaluation.

    LoRA adapters in llama.cpp's GGUF format (`load_lora`) share the one base in memory: a generation
    asked for with `lora=PATH` has that adapter set on the context before its prompt is decoded and
    cleared after. The kept KV state depends on the adapter, so each adapter (and the base) keeps its
    own stable prefix, and the context's cache is not reused across a change of adapter.

    Args:
        model_path: GGUF file; default: the configured one (`ASSISTANT_LLM_MODEL_PATH` or the built-in
            `ASSISTANT_LLM_MODEL`, assembled on first use).
        context_tokens: n_ctx: the longest prompt and answer llama.cpp accepts.
        threads: CPU threads for prompt evaluation and generation.
        window_tokens: the window the answerer plans prompts within (`context_tokens` attribute, at
            most n_ctx): on CPU the time to the first token grows with the prompt (15-35 ms a token
            on 2 cores), so the answerer's sources are packed into less than the whole context.

    Raises:
        ConfigError: the file is missing, or a built-in model cannot be assembled.
    """

    def __init__(
        self, model_path: Path | None = None, *, context_tokens: int = 4096, threads: int = 2,
        window_tokens: int | None = None,
    ):
        from llama_cpp import Llama  # noqa: PLC0415 - loads llama.cpp's library, only when the model is opened

        if model_path is None:
            model_path = configured_gguf_path(get_settings())
        path = Path(model_path)
        if not path.is_file():
            raise ConfigError(f"ASSISTANT_LLM_MODEL_PATH={str(path)!r} is not a GGUF file")
        self.name = path.stem
        self.context_tokens = min(window_tokens or context_tokens, context_tokens)
        self._llama = Llama(
            model_path=str(path), n_ctx=context_tokens, n_threads=threads, n_threads_batch=threads, verbose=False
        )
        self.sampling = SAMPLING.get(self._llama.metadata.get("general.architecture", ""), DEFAULT_SAMPLING)
        self._lock = threading.Lock()
        self._last_prompt: list[int] = []
        self._prefix_tokens: list[int] = []  # the stable prefix whose KV state `_prefix_state` holds
        self._prefix_state: LlamaState | None = None
        self._loras: dict[str, Any] = {}  # GGUF path -> llama_adapter_lora pointer
        self._kv_lora: str | None = None  # the adapter the context's KV cache was computed with
        self._kept: dict[str | None, tuple[list[int], list[int], LlamaState | None]] = {}  # other adapters' prefixes

    def load_lora(self, path: str | Path) -> str:
        """Load a GGUF LoRA adapter of this model once (about 18 MB for rank 8 on all projections of a
        0.5B model); returns the key to pass as `stream(lora=...)`.

        Raises:
            ConfigError: llama.cpp cannot load it (not a LoRA of this model's architecture and shapes).
        """
        import llama_cpp  # noqa: PLC0415 - loaded with the model

        key = str(Path(path).resolve())
        with self._lock:
            if key not in self._loras:
                handle = llama_cpp.llama_adapter_lora_init(self._llama._model.model, key.encode())
                if not handle:
                    raise ConfigError(f"llama.cpp cannot load {key} as a LoRA adapter of {self.name}")
                self._loras[key] = handle
        return key

    def _use_lora(self, lora: str | None) -> None:
        """Set adapter `lora` (None: none) on the context, under the lock; after a change of adapter the
        context's cache is dropped and that adapter's own kept prefix becomes the one restored."""
        import ctypes  # noqa: PLC0415

        import llama_cpp  # noqa: PLC0415 - loaded with the model

        if lora is None:
            llama_cpp.llama_set_adapters_lora(self._llama._ctx.ctx, None, 0, None)
        else:
            handles = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(self._loras[lora])
            llama_cpp.llama_set_adapters_lora(self._llama._ctx.ctx, handles, 1, (ctypes.c_float * 1)(1.0))
        if lora != self._kv_lora:
            self._kept[self._kv_lora] = (self._last_prompt, self._prefix_tokens, self._prefix_state)
            self._last_prompt, self._prefix_tokens, self._prefix_state = self._kept.pop(lora, ([], [], None))
            self._llama.n_tokens = 0  # the cached tokens' KV was computed with the other adapter
            self._kv_lora = lora

    def _restore_prefix(self) -> None:
        """Load the stable prefix's KV state when the context no longer starts with it (under the lock)."""
        n = len(self._prefix_tokens)
        if n and self._prefix_state is not None and self._llama._input_ids[:n].tolist() != self._prefix_tokens:
            self._llama.load_state(self._prefix_state)

    def _remember_prefix(self, prompt: list[int]) -> None:
        """After a generation whose prompt was `prompt` (under the lock): when it shares a prefix of at
        least MIN_STABLE_PREFIX_TOKENS with the previous prompt, other than the one saved, cut the context
        back to that prefix and save its KV state (a single row of logits: the suffix is always evaluated).
        The saved prefix is replaced only once prompts no longer start with it (a new system prompt)."""
        shared = 0
        for a, b in zip(prompt, self._last_prompt):
            if a != b:
                break
            shared += 1
        self._last_prompt = prompt
        # The same prompt again (a retry): keep all but its last token, so that the next one evaluates at
        # least one token and samples from fresh logits (a whole-prompt cut answered it with nothing).
        shared = min(shared, len(prompt) - 1)
        n = len(self._prefix_tokens)
        if shared < MIN_STABLE_PREFIX_TOKENS or (n and prompt[:n] == self._prefix_tokens):
            return  # nothing shared, or the saved prefix still starts the prompts
        llama = self._llama
        if llama._input_ids[:shared].tolist() != prompt[:shared] or not llama._ctx.kv_cache_seq_rm(-1, shared, -1):
            return
        llama.n_tokens = shared
        state = llama.save_state()
        state.scores = state.scores[-1:].copy()  # load_state broadcasts it; 600 KB instead of n x vocab
        self._prefix_tokens, self._prefix_state = prompt[:shared], state

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
        lora: str | None = None,
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
            lora: an adapter loaded with `load_lora` (its key), applied to this generation only.

        Yields:
            Non-empty text deltas, in order.

        Raises:
            ValueError: the prompt does not fit the context window (from llama.cpp), or a stop
                sequence is empty.
        """
        import llama_cpp  # noqa: PLC0415 - llama.cpp's library, loaded with the model
        from llama_cpp import LogitsProcessorList  # noqa: PLC0415

        stops = stop_list(stop)  # a list: llama.cpp appends the chat template's own stops to it
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        cancelled = threading.Event()
        prompt_tokens: list[int] = []  # the prompt's tokens, set by the worker before its first delta

        def send(kind: str, value: object) -> None:
            # The consumer may be gone (it closed the stream early, the client disconnected and
            # its event loop closed): the rest of the generation is discarded.
            if not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
                except RuntimeError:
                    cancelled.set()

        def observe_prompt(input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
            # A logits processor that changes nothing: llama.cpp calls it before sampling each token
            # with the tokens evaluated so far, so its first call sees exactly the prompt's tokens.
            if not prompt_tokens:
                prompt_tokens.extend(input_ids.tolist())
            return logits

        def produce() -> None:
            finish_reason = None
            try:
                with self._lock:
                    if cancelled.is_set():
                        # The caller left while this request waited for the model (one generation
                        # at a time): evaluating its prompt would only delay the next request.
                        return
                    if lora is not None or self._kv_lora is not None:
                        self._use_lora(lora)
                    self._restore_prefix()
                    # With stream=True llama.cpp returns a generator of chunks (its annotation also
                    # allows the whole response); ChatMessage's roles are its request messages' roles.
                    chunks = cast(
                        "Generator[CreateChatCompletionStreamResponse, None, None]",
                        self._llama.create_chat_completion(
                            messages=cast("list[ChatCompletionRequestMessage]", list(messages)),
                            max_tokens=max_tokens, temperature=temperature,
                            repeat_penalty=self.sampling.repeat_penalty, top_p=self.sampling.top_p,
                            top_k=self.sampling.top_k, stream=True,
                            logits_processor=LogitsProcessorList([observe_prompt]), stop=stops,
                        ),
                    )
                    try:
                        for chunk in chunks:
                            if cancelled.is_set():
                                break
                            choice = chunk["choices"][0]
                            finish_reason = choice.get("finish_reason") or finish_reason
                            delta = choice.get("delta", {}).get("content")
                            if delta:
                                send("delta", delta)
                    finally:
                        chunks.close()
                        if prompt_tokens:
                            self._remember_prefix(list(prompt_tokens))
                        if lora is not None:
                            llama_cpp.llama_set_adapters_lora(self._llama._ctx.ctx, None, 0, None)  # cleared after
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
                    raise cast(BaseException, value)
                else:
                    if result is not None and value in ("stop", "length"):
                        result.finish_reason = value
                    return
        finally:
            cancelled.set()
            if result is not None:
                result.usage = Usage(
                    prompt_tokens=len(prompt_tokens),
                    completion_tokens=min(self.count_tokens("".join(parts)), max_tokens) if parts else 0,
                )
