"""Publishing adapters to the model server: vLLM's runtime LoRA endpoints in production, nothing to do
in process (the router loads an adapter on its first request and drops it when it stops serving)."""

from __future__ import annotations

import logging
from typing import Literal, Protocol

import httpx

from assistant.adapters.gguf_lora import ensure_gguf_lora
from assistant.adapters.store import AdapterRecord, Release, get_adapter, promote, rollback
from assistant.core.db.session import Database
from assistant.core.errors import ConfigError, ConflictError, UpstreamUnavailableError
from assistant.core.settings import Settings

log = logging.getLogger(__name__)


class AdapterPublisher(Protocol):
    """Makes an adapter answerable under its name, or stops it; `prepare` runs before the registry changes."""

    def prepare(self, adapter: AdapterRecord) -> None: ...

    def load(self, adapter: AdapterRecord) -> None: ...

    def unload(self, adapter: AdapterRecord) -> None: ...


class VllmPublisher:
    """vLLM's runtime LoRA updating (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=true`, see deploy/vllm):
    `POST {base_url}/load_lora_adapter {"lora_name", "lora_path"}` and `POST .../unload_lora_adapter
    {"lora_name"}` (vLLM docs, "Dynamically serving LoRA adapters").

    Args:
        base_url: the OpenAI-compatible base URL, `.../v1` (`ASSISTANT_OPENAI_BASE_URL`).
        api_key: the server's key, if any.
        adapter_root: where the server finds adapter folders, when its file system mounts them
            elsewhere than ours (None: the registry's path as it is).
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers, transport=transport)

    def _post(self, path: str, body: dict) -> None:
        url = f"{self.base_url}/{path}"
        try:
            response = self._client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise UpstreamUnavailableError(f"the LLM server at {url} cannot be reached: {exc}") from exc
        if response.status_code >= 400:
            raise UpstreamUnavailableError(f"the LLM server refused {path} {body}: HTTP {response.status_code} {response.text[:300]}")

    def prepare(self, adapter: AdapterRecord) -> None:
        """Nothing: vLLM loads the PEFT folder itself."""

    def load(self, adapter: AdapterRecord) -> None:
        """Load `adapter`'s folder under its name."""
        self._post("load_lora_adapter", {"lora_name": adapter.name, "lora_path": adapter.path})

    def unload(self, adapter: AdapterRecord) -> None:
        """Unload `adapter` (an adapter the server does not hold is logged, not raised: the goal is reached)."""
        try:
            self._post("unload_lora_adapter", {"lora_name": adapter.name})
        except UpstreamUnavailableError as exc:
            log.warning("unloading adapter %s: %s", adapter.name, exc)


class InProcessPublisher:
    """The embedded default: the in-process router reads the registry and applies each adapter's GGUF
    LoRA in llama.cpp; publishing only makes sure that file is there."""

    def prepare(self, adapter: AdapterRecord) -> None:
        """Export `adapter`'s GGUF LoRA when it has none (`ensure_gguf_lora`).

        Raises:
            ConflictError: it cannot be exported, so it cannot move (409; the message names the adapter
                and the fix).
        """
        try:
            ensure_gguf_lora(adapter.path, adapter.base_model)
        except ConfigError as exc:
            raise ConflictError(f"adapter {adapter.name!r} cannot be published: {exc}") from None

    def load(self, adapter: AdapterRecord) -> None:
        """`prepare` (an adapter a rollback restores may predate its export); the router loads it on its
        first request."""
        self.prepare(adapter)

    def unload(self, adapter: AdapterRecord) -> None:
        """Nothing: the router drops an adapter that no longer serves."""


def publisher_for(settings: Settings) -> AdapterPublisher:
    """vLLM's endpoints with `llm_backend=openai`, the in-process publisher otherwise."""
    if settings.llm.backend == "openai":
        key = settings.llm.openai_api_key.get_secret_value() if settings.llm.openai_api_key else None
        return VllmPublisher(str(settings.llm.openai_base_url), api_key=key)
    return InProcessPublisher()


def apply_release(release: Release, publisher: AdapterPublisher) -> None:
    """Load what a promote or rollback put into service, then unload what it took out."""
    for adapter in release.loaded:
        publisher.load(adapter)
    for adapter in release.unloaded:
        publisher.unload(adapter)


def promote_and_publish(db: Database, adapter_id: int, *, by: str, publisher: AdapterPublisher,
                        to: Literal["canary", "live"] | None = None) -> Release:
    """Promote adapter `adapter_id` one step (or `to`) in the registry and publish the change.

    Raises:
        NotFoundError, ConflictError: see `assistant.adapters.store.promote`.
        ConfigError: the in-process publisher cannot export its GGUF LoRA (the registry is unchanged).
        UpstreamUnavailableError: the model server refused to load it (the registry has changed; a
            rollback brings them together again).
    """
    publisher.prepare(get_adapter(db, adapter_id))  # before the registry changes
    release = promote(db, adapter_id, by=by, to=to)
    apply_release(release, publisher)
    return release


def rollback_and_publish(db: Database, *, audience: str, by: str, publisher: AdapterPublisher) -> Release:
    """Retire the canary of `audience` (or, without one, the live adapter, restoring the previous one)
    and unload it from the model server.

    Raises:
        ConflictError: nothing to roll back.
    """
    release = rollback(db, audience=audience, by=by)
    apply_release(release, publisher)
    return release
