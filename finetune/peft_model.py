"""The gate's transformers copy of the base with peft adapters loaded by name: the answer-token
likelihoods of candidate and live (`answer_loss`), and, where the served model cannot answer with a
candidate before it is published (vLLM), their answers. Never on the request side: readers are
answered by llama.cpp with the adapter's GGUF LoRA (`assistant.adapters.llama_lora`) or by vLLM."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from assistant.core.llm.base import LLM, ChatMessage, StreamResult, Usage, stop_list
from finetune.base_model import load_base


class PeftServing:
    """One base model, its adapters by name, one generation at a time.

    Args:
        base_model: what `finetune.base_model.load_base` takes (the adapters' `base_model`).
        threads: torch CPU threads (0: leave torch's default).
    """

    def __init__(self, base_model: str, *, threads: int = 0):
        self.base_model = base_model
        self.threads = threads
        self._model: Any = None
        self._tokenizer: Any = None
        self._adapters: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def adapters(self) -> dict[str, str]:
        """Loaded adapters: name -> folder."""
        return dict(self._adapters)

    def load(self, name: str, path: str | Path) -> None:
        """Load the PEFT adapter in folder `path` as `name` (again if its folder changed)."""
        from peft import PeftModel  # noqa: PLC0415 - peft: ~10 s, only when an adapter is served

        with self._lock:
            if self._adapters.get(name) == str(path):
                return
            if self._model is None:
                base, self._tokenizer = load_base(self.base_model)
                self._model = PeftModel.from_pretrained(base, str(path), adapter_name=name)
            else:
                if name in self._adapters:
                    self._model.delete_adapter(name)
                self._model.load_adapter(str(path), adapter_name=name)
            self._model.eval()
            self._adapters[name] = str(path)

    def unload(self, name: str) -> None:
        """Drop adapter `name` (nothing happens when it is not loaded, or when it is the only one: a peft
        model keeps at least one adapter; it costs megabytes)."""
        with self._lock:
            if name in self._adapters and len(self._adapters) > 1:
                self._model.delete_adapter(name)
                self._adapters.pop(name)

    def generate(self, adapter: str | None, messages: list[ChatMessage], *, max_tokens: int, temperature: float,
                 stop: Sequence[str] = ()) -> tuple[str, int, int, str]:
        """The answer of `adapter` (None: the base model alone) to `messages`.

        Returns:
            `(text, prompt_tokens, completion_tokens, finish_reason)`; the text is cut before the first
            of `stop`.

        Raises:
            KeyError: `adapter` is not loaded.
        """
        import torch  # noqa: PLC0415 - torch: ~4 s, only when an adapter is served

        with self._lock:
            if self._model is None:
                base, self._tokenizer = load_base(self.base_model)
                model = base
            else:
                model = self._model
            if self.threads:
                torch.set_num_threads(self.threads)
            if adapter is not None:
                if adapter not in self._adapters:
                    raise KeyError(f"adapter {adapter!r} is not loaded; loaded: {sorted(self._adapters)}")
                model.set_adapter(adapter)
            prompt = self._tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            inputs = self._tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
            sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
            with torch.no_grad():
                if adapter is None and model is self._model:
                    with model.disable_adapter():
                        out = model.generate(**inputs, max_new_tokens=max_tokens, pad_token_id=self._tokenizer.pad_token_id, **sampling)
                else:
                    out = model.generate(**inputs, max_new_tokens=max_tokens, pad_token_id=self._tokenizer.pad_token_id, **sampling)
            new = out[0, inputs["input_ids"].shape[1]:]
            text = self._tokenizer.decode(new, skip_special_tokens=True)
            finish = "length" if len(new) >= max_tokens else "stop"
            for s in stop_list(stop):
                if s in text:
                    text, finish = text[: text.index(s)], "stop"
            return text, int(inputs["input_ids"].shape[1]), int(len(new)), finish

    def answer_loss(self, adapter: str | None, pairs: Sequence[tuple[str, str]]) -> float | None:
        """Mean negative log-likelihood per answer token (nats) of each `(question, answer)` pair under
        `adapter` (None: the base model), the question as the chat template's user turn (teacher
        forcing; lower is better). None when `pairs` is empty.

        Raises:
            KeyError: `adapter` is not loaded.
        """
        import torch  # noqa: PLC0415 - torch: ~4 s, only when an adapter is served

        if not pairs:
            return None
        with self._lock:
            if self._model is None:
                raise KeyError("no adapter is loaded: load one before scoring")
            model = self._model
            total, count = 0.0, 0
            with torch.no_grad(), (model.disable_adapter() if adapter is None else _using(model, adapter, self._adapters)):
                for question, answer in pairs:
                    prompt = self._tokenizer(self._tokenizer.apply_chat_template(
                        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True),
                        add_special_tokens=False)["input_ids"]
                    target = self._tokenizer(answer, add_special_tokens=False)["input_ids"]
                    ids = torch.tensor([prompt + target])
                    labels = torch.tensor([[-100] * len(prompt) + target])
                    loss = model(input_ids=ids, labels=labels).loss
                    total += float(loss) * len(target)
                    count += len(target)
            return total / count if count else None

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the base model's tokenizer."""
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    _, self._tokenizer = load_base(self.base_model)
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])


class _using:
    """`with _using(model, name, loaded):` makes adapter `name` the active one."""

    def __init__(self, model: Any, name: str, loaded: dict[str, str]):
        if name not in loaded:
            raise KeyError(f"adapter {name!r} is not loaded; loaded: {sorted(loaded)}")
        self.model, self.name = model, name

    def __enter__(self) -> None:
        self.model.set_adapter(self.name)

    def __exit__(self, *exc: object) -> None:
        return None


class PeftAdapterLLM(LLM):
    """The `LLM` of one adapter of a `PeftServing` (None: its base model without adapters)."""

    def __init__(self, serving: PeftServing, adapter: str | None, *, context_tokens: int = 2048):
        self.serving = serving
        self.adapter = adapter
        self.name = adapter or serving.base_model
        self.context_tokens = context_tokens

    def count_tokens(self, text: str) -> int:
        return self.serving.count_tokens(text)

    async def stream(self, messages: list[ChatMessage], *, max_tokens: int, temperature: float,
                     result: StreamResult | None = None, stop: Sequence[str] = ()) -> AsyncIterator[str]:
        """The whole answer as one delta (transformers generates it in a worker thread)."""
        text, prompt_tokens, completion_tokens, finish = await asyncio.to_thread(
            self.serving.generate, self.adapter, messages, max_tokens=max_tokens, temperature=temperature, stop=stop
        )
        if result is not None:
            result.finish_reason = finish  # type: ignore[assignment]
            result.usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        if text:
            yield text
