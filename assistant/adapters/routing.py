"""Which LoRA adapter answers a request: the live adapter of the reader's audience, or its canary for a
stable share of users, and never an adapter of a group the reader is not in."""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from assistant.adapters.llama_lora import GGUF_ADAPTER_FILE, LlamaLoraLLM
from assistant.adapters.store import AdapterRecord
from assistant.core.errors import ConfigError
from assistant.core.llm.base import LLM, ChatMessage, StreamResult
from assistant.core.llm.llama_cpp import LlamaCppLLM
from assistant.core.principals import EVERYONE, Principal


def canary_bucket(user: str, audience: str) -> float:
    """A stable number in [0, 1) for `user` within `audience` (SHA-256 of both): users below the canary
    share get the canary, the same users every time."""
    digest = hashlib.sha256(f"{audience}\x00{user}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def choose_adapter(adapters: Sequence[AdapterRecord], principal: Principal, *, canary_share: float) -> AdapterRecord | None:
    """The adapter that answers `principal`, or None for the base model.

    Audiences the principal belongs to are tried from the most specific (its groups, by name) to
    `everyone`; in each, the canary answers a user whose `canary_bucket` is below `canary_share`, the
    live adapter everyone else. An adapter whose audience the principal does not hold is never chosen.
    """
    tokens = set(principal.acl_tokens)
    audiences = sorted({a.audience for a in adapters if a.audience in tokens}, key=lambda a: (a == EVERYONE, a))
    for audience in audiences:
        mine = [a for a in adapters if a.audience == audience]
        canary = next((a for a in mine if a.status == "canary"), None)
        live = next((a for a in mine if a.status == "live"), None)
        if canary is not None and canary_bucket(principal.name, audience) < canary_share:
            return canary
        if live is not None:
            return live
    return None


class _OnBase(LLM):
    """An `LLM` whose name, window and tokenizer are those of its `base` model (its adapters share them)."""

    base: LLM

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.base.name

    @property
    def context_tokens(self) -> int:  # type: ignore[override]
        return self.base.context_tokens

    def count_tokens(self, text: str) -> int:
        return self.base.count_tokens(text)


class AdapterRouter(_OnBase):
    """An `LLM` that sends each generation to the adapter chosen for a principal: `for_principal` gives
    the model one request is answered with; `stream` itself (no principal) is the base model's.

    Args:
        base: the served model without adapters (its `name`, window and tokenizer are this LLM's).
        adapters: reads the serving adapters (`assistant.adapters.store.serving_adapters`).
        open_adapter: the `LLM` of one adapter (a copy of the vLLM client asking for the adapter's
            name, or the llama.cpp base with the adapter's GGUF LoRA); built once per adapter name and folder.
        canary_share: share of users the canary answers, in [0, 1].
        refresh_s: how long the list of serving adapters is reused before it is read again, seconds;
            promote and rollback call `refresh` so that the switch needs no restart.
    """

    def __init__(self, base: LLM, *, adapters: Callable[[], list[AdapterRecord]],
                 open_adapter: Callable[[AdapterRecord], LLM], canary_share: float, refresh_s: float = 5.0):
        self.base = base
        self._read = adapters
        self._open = open_adapter
        self.canary_share = canary_share
        self.refresh_s = refresh_s
        self._adapters: list[AdapterRecord] = []
        self._read_at = float("-inf")
        self._llms: dict[tuple[str, str], LLM] = {}
        self._lock = threading.Lock()

    def refresh(self) -> list[AdapterRecord]:
        """Read the serving adapters now; returns them."""
        adapters = self._read()
        with self._lock:
            self._adapters, self._read_at = adapters, time.monotonic()
            keep = {(a.name, a.path) for a in adapters}
            self._llms = {k: v for k, v in self._llms.items() if k in keep}
        return adapters

    def choose(self, principal: Principal | None) -> AdapterRecord | None:
        """The adapter that answers `principal` now (None: the base model), without loading it; the
        list of serving adapters is read again when older than `refresh_s`. The answer cache keys
        its entries by this choice."""
        if time.monotonic() - self._read_at > self.refresh_s:
            self.refresh()
        if principal is None:
            return None
        return choose_adapter(self._adapters, principal, canary_share=self.canary_share)

    def route(self, principal: Principal | None) -> tuple[AdapterRecord | None, LLM]:
        """The adapter (None: the base model) and the `LLM` that answer `principal`."""
        adapter = self.choose(principal)
        if adapter is None:
            return None, self.base
        key = (adapter.name, adapter.path)
        with self._lock:
            llm = self._llms.get(key)
        if llm is None:
            llm = self._open(adapter)
            with self._lock:
                self._llms[key] = llm
        return adapter, llm

    def for_principal(self, principal: Principal | None) -> RoutedLLM:
        """The `LLM` that answers `principal`: each of its generations goes to the adapter chosen for
        `principal` at that moment (`route`), and it names the adapter of its last generation."""
        return RoutedLLM(self, principal)

    def stream(self, messages: list[ChatMessage], *, max_tokens: int, temperature: float,
               result: StreamResult | None = None, stop: Sequence[str] = ()) -> AsyncIterator[str]:
        """`LLM.stream` of the base model: a generation for no principal (`for_principal` routes one)."""
        return self.route(None)[1].stream(
            messages, max_tokens=max_tokens, temperature=temperature, result=result, stop=stop
        )

    async def aclose(self) -> None:
        await self.base.aclose()


class RoutedLLM(_OnBase):
    """The `AdapterRouter` as one principal's model (`AdapterRouter.for_principal`).

    Attributes:
        served: the name of the adapter that ran this model's last generation (None: the base model,
            or no generation yet).
    """

    def __init__(self, router: AdapterRouter, principal: Principal | None):
        self.router = router
        self.base = router.base
        self.principal = principal
        self.served: str | None = None

    def stream(self, messages: list[ChatMessage], *, max_tokens: int, temperature: float,
               result: StreamResult | None = None, stop: Sequence[str] = ()) -> AsyncIterator[str]:
        """`LLM.stream` of the adapter chosen for `principal` now, returned as it is (so that closing it
        early closes the model's own stream at once, which then counts its usage); sets `served`."""
        adapter, llm = self.router.route(self.principal)
        self.served = adapter.name if adapter else None
        return llm.stream(messages, max_tokens=max_tokens, temperature=temperature, result=result, stop=stop)


def remote_adapter(base: LLM) -> Callable[[AdapterRecord], LLM]:
    """`open_adapter` for an OpenAI-compatible server (vLLM): the same client asking for the adapter's
    name as its model (vLLM serves a loaded LoRA under its `lora_name`)."""

    def open_adapter(adapter: AdapterRecord) -> LLM:
        backend = getattr(base, "backend", base)  # a DeferredLLM opens its backend here
        llm = copy.copy(backend)
        llm.name = adapter.name
        return llm

    return open_adapter


def local_adapter(base: LLM) -> Callable[[AdapterRecord], LLM]:
    """`open_adapter` for the embedded default: the adapter's GGUF LoRA (`adapter.gguf`, written when it
    was trained or published) applied by the llama.cpp model `base` serves (`llama_lora`: one base in
    memory, no second model; nothing on this path imports transformers or peft).

    Raises (from the returned function):
        ConfigError: `base` is not a llama.cpp model, or the adapter has no `adapter.gguf` (the message
            names the fix; publishing writes it: `gguf_lora.ensure_gguf_lora`).
    """

    def open_adapter(adapter: AdapterRecord) -> LLM:
        backend = getattr(base, "backend", base)  # a DeferredLLM opens its backend here
        if not isinstance(backend, LlamaCppLLM):
            raise ConfigError(f"adapter {adapter.name} is served in process by llama.cpp only; the model is {type(backend).__name__}")
        if not (Path(adapter.path) / GGUF_ADAPTER_FILE).is_file():
            raise ConfigError(
                f"adapter {adapter.name} ({adapter.status}) has no {GGUF_ADAPTER_FILE} in {adapter.path}, so llama.cpp cannot "
                "apply it (publishing writes it; a transformers + peft model is never loaded to serve it): retire it "
                "(`assistant finetune rollback`) and run a refresh on the served model (`assistant finetune run`)"
            )
        return LlamaLoraLLM(backend, adapter.path, name=adapter.name)

    return open_adapter
