"""Any OpenAI-compatible server (vLLM in production) over HTTP with the official `openai` client."""

from __future__ import annotations

from typing import AsyncIterator

import httpx
import openai

from assistant.core.errors import UpstreamUnavailableError
from assistant.core.llm.base import LLM, ChatMessage


class OpenAICompatLLM(LLM):
    """Streams chat completions from `base_url` (e.g. `http://vllm:8000/v1`).

    Args:
        base_url: the server's `/v1` URL.
        model: model (or LoRA adapter) name to request.
        api_key: bearer token, if the server wants one.
        context_tokens: the served `max_model_len`.
        connect_timeout_s / read_timeout_s: HTTP timeouts in seconds.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        context_tokens: int = 8192,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
    ):
        self.name = model
        self.context_tokens = context_tokens
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
            max_retries=2,  # the client retries connection errors and 5xx with jittered backoff
        )

    def count_tokens(self, text: str) -> int:
        # Without the served tokenizer at hand, over-estimate: ~3 characters per token for English,
        # 1 per CJK character, so that a prompt judged to fit really does.
        cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
        return cjk + (len(text) - cjk) // 3 + 1

    async def stream(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float
    ) -> AsyncIterator[str]:
        try:
            response = await self._client.chat.completions.create(
                model=self.name, messages=list(messages), max_tokens=max_tokens,
                temperature=temperature, stream=True,
            )
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise UpstreamUnavailableError(f"the LLM server at {self._client.base_url} is unreachable: {exc}")
        except openai.InternalServerError as exc:
            raise UpstreamUnavailableError(f"the LLM server at {self._client.base_url} failed: {exc}")
        try:
            async for chunk in response:
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        finally:
            await response.close()  # closing the HTTP stream cancels the request upstream

    async def aclose(self) -> None:
        await self._client.close()
