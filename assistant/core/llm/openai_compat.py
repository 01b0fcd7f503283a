"""Any OpenAI-compatible server (vLLM in production) over HTTP with the official `openai` client.

Failure handling, in the order a request meets it:

- timeouts: `connect_timeout_s` to open a connection, `read_timeout_s` for the response headers and
  then for each gap between two streamed chunks;
- retries: only a failed *connection* (refused, reset, connect timeout, a stale keep-alive socket) is
  retried, `connect_retries` times with exponential backoff and full jitter. An answered request
  (any HTTP status) and a read timeout are never retried: the server got the prompt, and repeating
  it would only add load to a server that is busy;
- circuit breaker (`assistant.core.llm.breaker`): each failed connection counts; after
  `breaker_failure_threshold` in a row, calls fail fast with `UpstreamUnavailableError` (Retry-After)
  for `breaker_cooldown_s`, then one probe call decides whether service resumes;
- cancellation: closing the iterator returned by `stream()` closes the HTTP response, so the server
  sees the disconnect and stops generating (vLLM aborts the request). Stop sequences are not a reason
  to close it: they travel in the request's `stop`, so the server ends the answer itself and still
  sends its last chunks (finish_reason, and vLLM's usage).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

try:  # openai >= 3 speaks HTTP through httpx2; older releases through httpx
    import httpx2 as _http
except ImportError:  # pragma: no cover - depends on the installed openai release
    import httpx as _http  # type: ignore[no-redef]  # the same API under httpx's own name

from assistant.core.errors import (
    AssistantError,
    ConfigError,
    InvalidRequestError,
    OverloadedError,
    UpstreamUnavailableError,
)
from assistant.core.language import count_cjk
from assistant.core.llm.base import LLM, ChatMessage, StreamResult, Usage, stop_list
from assistant.core.llm.breaker import CircuitBreaker
from assistant.core.metrics import LLM_ERRORS

if TYPE_CHECKING:
    from assistant.core.settings import Settings

# httpx (and httpx2, which newer `openai` releases use) name their timeout errors alike; a connect
# timeout means nobody answered the SYN, any other timeout means a server that is up but slow.
_CONNECT_TIMEOUT_NAMES = {"ConnectTimeout"}


class OpenAICompatLLM(LLM):
    """Streams chat completions from `base_url` (e.g. `http://vllm:8000/v1`).

    Args:
        base_url: the server's `/v1` URL.
        model: model (or LoRA adapter) name to request.
        api_key: bearer token, if the server wants one.
        context_tokens: the served `max_model_len`, in tokens.
        connect_timeout_s: seconds to open a TCP connection.
        read_timeout_s: seconds to wait for the response headers, then for each streamed chunk.
        connect_retries: retries of a failed connection per call (0 = none).
        retry_backoff_s: backoff cap of the first retry in seconds; doubles per retry.
        retry_backoff_max_s: largest backoff cap in seconds.
        breaker_failure_threshold: consecutive connection failures that open the circuit breaker.
        breaker_cooldown_s: seconds the open breaker fails fast before it lets one probe through.

    Attributes:
        breaker: the circuit breaker guarding `base_url` (its `state` is useful to health checks).
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
        connect_retries: int = 2,
        retry_backoff_s: float = 0.25,
        retry_backoff_max_s: float = 2.0,
        breaker_failure_threshold: int = 5,
        breaker_cooldown_s: float = 30.0,
    ):
        self.name = model
        self.context_tokens = context_tokens
        self._base_url = base_url
        self._read_timeout_s = read_timeout_s
        self._connect_retries = connect_retries
        self._retry_backoff_s = retry_backoff_s
        self._retry_backoff_max_s = retry_backoff_max_s
        self.breaker = CircuitBreaker(
            f"the LLM server at {base_url}",
            failure_threshold=breaker_failure_threshold,
            cooldown_s=breaker_cooldown_s,
        )
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=openai.Timeout(read_timeout_s, connect=connect_timeout_s),
            max_retries=0,  # retries are ours: connection failures only, counted by the breaker
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatLLM:
        """The backend configured by `ASSISTANT_OPENAI_*`, `ASSISTANT_*_TIMEOUT_S` and `ASSISTANT_LLM_*`.

        Args:
            settings: the process settings.

        Returns:
            A client for `settings.openai_base_url`; it opens no connection yet.
        """
        return cls(
            settings.llm.openai_base_url,
            settings.llm.openai_model,
            api_key=settings.llm.openai_api_key.get_secret_value(),
            context_tokens=settings.llm.context_tokens,
            connect_timeout_s=settings.llm.connect_timeout_s,
            read_timeout_s=settings.llm.request_timeout_s,
            connect_retries=settings.llm.connect_retries,
            retry_backoff_s=settings.llm.retry_backoff_s,
            retry_backoff_max_s=settings.llm.retry_backoff_max_s,
            breaker_failure_threshold=settings.llm.breaker_failure_threshold,
            breaker_cooldown_s=settings.llm.breaker_cooldown_s,
        )

    def count_tokens(self, text: str) -> int:
        # Without the served tokenizer at hand, over-estimate: ~3 characters per token for English,
        # 1 per CJK character, so that a prompt judged to fit really does.
        cjk = count_cjk(text)
        return cjk + (len(text) - cjk) // 3 + 1

    async def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        result: StreamResult | None = None,
        stop: Sequence[str] = (),
    ) -> AsyncIterator[str]:
        """Yield the answer as text deltas; `aclose()` on the iterator closes the HTTP stream.

        Args:
            messages: the chat, system message first.
            max_tokens: answer length limit, in tokens.
            temperature: sampling temperature (0 = greedy).
            result: filled in as the stream ends: the server's `finish_reason`, and its `usage` (asked
                for with `stream_options.include_usage`; vLLM sends it in a last chunk). A server that
                sends no usage (llama_cpp.server when streaming), or a stream closed before its end,
                gets usage counted here with `count_tokens`: an over-estimate, not the server's figure.
            stop: stop sequences, sent as the request's `stop` (a list, all of them: vLLM and
                llama_cpp.server take more than the 4 OpenAI's own API allows; none = no `stop`
                field). The server ends the answer before the first that appears, with
                finish_reason "stop". They are not looked for in the text here: a server that
                ignores `stop` streams past them.

        Yields:
            Non-empty text deltas, in order.

        Raises:
            UpstreamUnavailableError: the server cannot be reached (after the connection retries),
                the breaker is open, no chunk came within `read_timeout_s`, or the server failed
                (5xx, or an error mid-stream). Its headers carry Retry-After (seconds).
            OverloadedError: the server answered 429.
            InvalidRequestError: the server refused the request (400/422, e.g. prompt too long).
            ConfigError: the server does not serve the model (404) or refuses the API key (401/403).
            ValueError: a stop sequence is empty (raised before any request).
        """
        http = await self._open_stream(messages, max_tokens=max_tokens, temperature=temperature, stop=stop_list(stop))
        parts: list[str] = []
        finish_reason = None
        usage: dict[str, Any] | None = None
        try:
            # The SSE lines are read and decoded here rather than through `openai.AsyncStream`,
            # which builds a pydantic object per token: at hundreds of concurrent streams that
            # parsing alone outgrew two cores (docs/notes/serving-and-ingestion-investigations.md,
            # "Serving under load").
            async for line in http.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("error"):
                    raise self._unavailable("reported an error mid-answer", RuntimeError(str(chunk["error"])))
                usage = chunk.get("usage") or usage
                choices = chunk.get("choices") or ()
                if not choices:
                    continue
                finish_reason = choices[0].get("finish_reason") or finish_reason
                content = (choices[0].get("delta") or {}).get("content")
                if content:
                    parts.append(content)
                    yield content
        except _http.TimeoutException as exc:
            raise self._unavailable(f"sent no chunk within {self._read_timeout_s} s", exc) from exc
        except (_http.TransportError, json.JSONDecodeError) as exc:
            self.breaker.record_failure()  # it went away (or garbled the stream) mid-answer
            raise self._unavailable("dropped the connection mid-answer", exc) from exc
        finally:
            # Runs on exhaustion, on error and on `aclose()` (GeneratorExit): closing the response
            # closes its connection, which is how the server learns to stop generating.
            await http.aclose()
            if result is not None:
                if finish_reason in ("stop", "length"):
                    result.finish_reason = finish_reason
                result.usage = self._usage(usage, messages, "".join(parts), max_tokens=max_tokens)

    def _usage(
        self, reported: dict[str, Any] | None, messages: list[ChatMessage], answer: str, *, max_tokens: int
    ) -> Usage:
        """The server's `usage` when it sent one; else a count with `count_tokens` (an over-estimate
        of the prompt without its chat template, and of the answer capped at `max_tokens`)."""
        if reported:
            return Usage(
                prompt_tokens=int(reported.get("prompt_tokens") or 0),
                completion_tokens=int(reported.get("completion_tokens") or 0),
            )
        return Usage(
            prompt_tokens=sum(self.count_tokens(m["content"]) for m in messages),
            completion_tokens=min(self.count_tokens(answer), max_tokens) if answer else 0,
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.close()

    async def _open_stream(
        self, messages: list[ChatMessage], *, max_tokens: int, temperature: float, stop: list[str]
    ) -> _http.Response:
        """Send the request (`stop` omitted when empty); return the HTTP response (body unread) once
        the server sent headers.

        The body is posted as it is (`AsyncOpenAI.post`), not through `chat.completions.create`, whose
        walk of the messages against the request's type hints (`maybe_transform`) cost about as much
        CPU as the rest of the request (issue 38: ~5 ms a call under cProfile): a chat's messages are
        already plain `{"role", "content"}` strings, which it leaves as they are."""
        body: dict[str, Any] = {
            "model": self.name, "messages": list(messages), "max_tokens": max_tokens, "temperature": temperature,
            "stream": True,
            # vLLM then ends the stream with a chunk that holds the usage and no choices.
            "stream_options": {"include_usage": True},
        }
        if stop:
            body["stop"] = stop
        retries = 0
        while True:
            self.breaker.before_call()
            try:
                stream = await self._client.post(
                    "/chat/completions", body=body, cast_to=ChatCompletion, stream=True,
                    stream_cls=openai.AsyncStream[ChatCompletionChunk],
                )
            except openai.APIConnectionError as exc:
                if not _is_connection_failure(exc):
                    self.breaker.release()  # connected, but the answer is slow: not a down server
                    raise self._unavailable(
                        f"did not answer within read_timeout_s={self._read_timeout_s}", exc
                    ) from exc
                self.breaker.record_failure()
                if retries >= self._connect_retries or self.breaker.state == "open":
                    raise self._unavailable(
                        f"is unreachable after {retries + 1} connection attempt(s)", exc
                    ) from exc
                await asyncio.sleep(self._backoff_s(retries))
                retries += 1
                continue
            except openai.APIStatusError as exc:
                self.breaker.record_success()  # it answered: the connection is fine
                raise self._status_error(exc) from exc
            except BaseException:
                self.breaker.release()  # cancelled (or a bug): no verdict on the server
                raise
            self.breaker.record_success()
            return stream.response

    def _backoff_s(self, retry: int) -> float:
        """Seconds before retry number `retry` (0-based): "full jitter", uniform in [0, cap] with the
        cap doubling per retry up to `retry_backoff_max_s` (M. Brooker, "Exponential Backoff And
        Jitter", AWS Architecture Blog, 2015), so that clients cut off together do not return in step.
        """
        cap_s = min(self._retry_backoff_max_s, self._retry_backoff_s * (2**retry))
        return random.uniform(0.0, cap_s)

    def _unavailable(self, what: str, exc: Exception) -> UpstreamUnavailableError:
        LLM_ERRORS.labels("unavailable").inc()
        return UpstreamUnavailableError(
            f"the LLM server at {self._base_url} {what}: {exc}",
            retry_after_s=self.breaker.retry_after_s(),
        )

    def _status_error(self, exc: openai.APIStatusError) -> AssistantError:
        LLM_ERRORS.labels("http_error").inc()
        status = exc.status_code
        where = f"the LLM server at {self._base_url}"
        if status == 429:
            retry_after = exc.response.headers.get("retry-after", "")
            return OverloadedError(
                f"{where} is overloaded (HTTP 429): {exc.message}",
                retry_after_s=int(retry_after) if retry_after.isdigit() else 5,
            )
        if status in (401, 403):
            return ConfigError(f"{where} refused ASSISTANT_OPENAI_API_KEY (HTTP {status}): {exc.message}")
        if status == 404:
            return ConfigError(f"{where} does not serve model {self.name!r} (HTTP 404): {exc.message}")
        if status in (400, 413, 422):
            return InvalidRequestError(f"{where} refused the request (HTTP {status}): {exc.message}")
        return UpstreamUnavailableError(
            f"{where} failed (HTTP {status}): {exc.message}", retry_after_s=self.breaker.retry_after_s()
        )


def _is_connection_failure(exc: openai.APIConnectionError) -> bool:
    """True when no server took the request: refused, reset, DNS, connect timeout, stale socket.

    A read timeout (the server accepted the request and is slow) and a wait for a free connection of
    our own pool are not: retrying them, or counting them against the server, would be wrong.
    """
    if isinstance(exc, openai.APITimeoutError):
        return type(exc.__cause__).__name__ in _CONNECT_TIMEOUT_NAMES
    return True
