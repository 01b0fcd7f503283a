"""OpenAI-compatible `/v1/chat/completions` and `/v1/models`, answered with RAG under the caller's ACL.

Tools that speak the OpenAI API (SDKs, IDE plugins, the helpdesk's bot framework) call these with an API
key. The last user message is the question, earlier user/assistant messages are the history; system
messages from the client are ignored, so the product's stable system prompt stays first (prefix cache)
and a client cannot talk the model out of citing. Citations come in the non-standard `citations`
field: of the completion, or of the last streamed chunk (the one with `finish_reason`). When an answer
is declined after part of it was streamed (too little of it was supported by the sources), that last
chunk also carries a non-standard `replace` field: the whole answer to show instead of the content
streamed before it; for clients that ignore it (a standard OpenAI client appends every delta), a last
content delta before that chunk says that the sentences above are withdrawn and gives the answer
(`WITHDRAWN`). Errors use
OpenAI's shape `{"error": {"message", "type", "code"}}` (see `assistant.api.errors`).

`finish_reason` is "length" when the answer was cut at `max_tokens` (the request's, capped at the
server's `ASSISTANT_LLM_MAX_TOKENS`), else "stop". `usage` (`prompt_tokens`, `completion_tokens`,
`total_tokens`) is the tokens this request's answer generation used. Their source depends on the
backend: llama.cpp in process gives the prompt's exact count and the answer's counted with the model's
tokenizer; an OpenAI-compatible server gives its own figures (vLLM: our stop sequences go in its
request's `stop`, so it ends the answer itself and still sends them), except where it reports none
(llama_cpp.server) or where it ignored `stop` and the answer ended at one of our stop sequences (the
stream is closed before the server's usage chunk): then both are over-estimates counted here. An answer
from the answer cache, or an abstention (no model call), reports zeros; an LLM rewrite of a follow-up
question is not counted. Streamed, usage comes as OpenAI sends it: when the request sets
`stream_options.include_usage`, in a last chunk with empty `choices`. A request whose `max_tokens`,
`temperature` or `stop` change the server's generation parameters (`generation_params`) bypasses the
answer cache, which holds answers made with the server's own. `stop` adds the caller's sequences (at
most 4) to the product's own; `n` other than 1 and tool calling are refused with a 400
(`unsupported_parameter`) instead of being ignored.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from assistant.answering.events import Citations, Done, Replace, Token
from assistant.api.deps import AssistantDep, PrincipalDep
from assistant.api.errors import openai_error_body
from assistant.api.routes.chat import request_audit
from assistant.api.schemas.openai_compat import RAG_MODEL, ChatCompletionRequest
from assistant.api.sse import SSE_HEADERS, paced_stream
from assistant.core.db.usage import record_usage
from assistant.core.errors import AssistantError, AuthenticationError, InvalidRequestError, NotFoundError
from assistant.core.language import question_language
from assistant.core.questions import check_query

log = logging.getLogger(__name__)

# The content delta that follows sentences streamed before a decline, in the question's language, for
# clients that do not honour `replace` (the answer to show then follows it).
WITHDRAWN = {
    "en": "(Withdrawn: the documents do not support the sentences above.)",
    "zh": "（以上内容已撤回：文档不支持这些说法。）",
}


def require_api_key(request: Request, _principal: PrincipalDep) -> None:
    """Refuse browser sessions: the `/v1` endpoints are for tools presenting `Authorization: Bearer KEY`.

    Raises:
        AuthenticationError: the caller signed in with a session cookie.
    """
    if getattr(request.state, "auth_method", None) != "api_key":
        raise AuthenticationError(
            "the /v1 endpoints need 'Authorization: Bearer KEY' (an API key), not a session cookie",
            headers={"WWW-Authenticate": 'Bearer realm="assistant"'},
        )


router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_key)])


_MODEL_CARD = {"id": RAG_MODEL, "object": "model", "created": 0, "owned_by": "assistant"}


@router.get("/models")
def list_models() -> dict:
    """The one model served here: retrieval-augmented answers from the caller's documents."""
    return {"object": "list", "data": [_MODEL_CARD]}


@router.get("/models/{model}")
def retrieve_model(model: str) -> dict:
    """One model's card, as the OpenAI SDK's `models.retrieve` asks for it.

    Raises:
        NotFoundError: `model` is not `assistant-rag` (404, code `model_not_found`).
    """
    if model != RAG_MODEL:
        raise NotFoundError(f"model '{model}' not found; this server serves '{RAG_MODEL}'", code="model_not_found")
    return dict(_MODEL_CARD)


def _conversation(body: ChatCompletionRequest) -> tuple[str, list[dict]]:
    """`(question, history)` from the messages: the last user message, and the user/assistant turns before it."""
    if body.model != RAG_MODEL:
        raise NotFoundError(f"model '{body.model}' not found; this server serves '{RAG_MODEL}'", code="model_not_found")
    last = body.messages[-1]
    question = last.text().strip()
    if last.role != "user" or not question:
        raise InvalidRequestError("the last message must be a non-empty 'user' message (the question)")
    history = [
        {"role": m.role, "content": m.text()} for m in body.messages[:-1] if m.role in ("user", "assistant") and m.text()
    ]
    return question, history


def _chunk(base: dict, delta: dict, finish: str | None = None, **extra: Any) -> dict:
    return {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def render_openai_chunks(batch: list[dict]) -> str:
    """SSE text for a batch of completion chunks, consecutive content deltas merged into one chunk."""
    merged: list[dict] = []
    for item in batch:
        prev = merged[-1] if merged else None
        if (
            prev is not None and "choices" in item and "choices" in prev and prev["choices"]
            and item["choices"] and set(item["choices"][0]["delta"]) == {"content"}
            and set(prev["choices"][0]["delta"]) == {"content"} and prev["choices"][0]["finish_reason"] is None
        ):
            text = prev["choices"][0]["delta"]["content"] + item["choices"][0]["delta"]["content"]
            merged[-1] = _chunk({k: prev[k] for k in ("id", "created", "model")}, {"content": text})
        else:
            merged.append(item)
    return "".join("data: [DONE]\n\n" if m.get("done") else f"data: {json.dumps(m, ensure_ascii=False)}\n\n" for m in merged)


@router.post("/chat/completions")
async def chat_completions(
    body: ChatCompletionRequest, assistant: AssistantDep, principal: PrincipalDep, request: Request
):
    """A chat completion answered from the documents the caller may read (streamed when `stream`).

    Raises:
        NotFoundError: `model` is not `assistant-rag` (404, code `model_not_found`).
        InvalidRequestError: no final user message, a bad `stop`, or `n` > 1 or tools, which this
            endpoint does not support (400, code `unsupported_parameter`).
        OverloadedError: too many requests wait for the model (429 with Retry-After).
    """
    body.check_supported()
    question, history = _conversation(body)
    check_query(question)  # before a stream starts: a 400, not an in-band error
    answerer = assistant.answerer
    params = body.generation_params(answerer.defaults)
    audit = request_audit(assistant, request, endpoint="/v1/chat/completions")
    ticket = answerer.admit(principal)
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": RAG_MODEL}
    started = time.perf_counter()
    db = assistant.resources.db
    if not body.stream:
        result = await answerer.answer(
            question, principal=principal, history=history, ticket=ticket, params=params, audit=audit
        )
        request.state.usage_tokens = result.usage.total_tokens  # charged to the key's rate limit
        await run_in_threadpool(
            lambda: record_usage(db, endpoint="v1", abstained=result.abstained, duration_s=time.perf_counter() - started)
        )
        return {
            **base,
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0, "message": {"role": "assistant", "content": result.answer},
                    "finish_reason": result.finish_reason,
                }
            ],
            "usage": result.usage.to_dict(),
            "citations": [c.to_dict() for c in result.citations],
            "abstained": result.abstained,
        }

    async def chunks() -> AsyncIterator[dict]:
        yield _chunk(base, {"role": "assistant", "content": ""})
        citations: list[dict] = []
        replaced: dict = {}
        answering = answerer.stream(
            question, principal=principal, history=history, ticket=ticket, params=params, audit=audit
        )
        try:
            async for event in answering:
                if isinstance(event, Token):
                    yield _chunk(base, {"content": event.text})
                elif isinstance(event, Replace):  # declined after some content was sent
                    replaced = {"replace": event.text}
                elif isinstance(event, Citations):
                    citations = event.citations
                elif isinstance(event, Done):
                    request.state.usage_tokens = event.usage.total_tokens  # charged after the stream
                    done = event
                    await run_in_threadpool(
                        lambda: record_usage(db, endpoint="v1", abstained=done.abstained,
                                             duration_s=time.perf_counter() - started)
                    )
                    if replaced and event.abstained:
                        note = WITHDRAWN.get(question_language(question), WITHDRAWN["en"])
                        yield _chunk(base, {"content": f"\n\n{note} {replaced['replace']}"})
                    yield _chunk(
                        base, {}, event.finish_reason, citations=citations, abstained=event.abstained, **replaced
                    )
                    if body.stream_options is not None and body.stream_options.include_usage:
                        yield {**base, "object": "chat.completion.chunk", "choices": [], "usage": event.usage.to_dict()}
        except AssistantError as exc:
            yield openai_error_body(exc.code, exc.message, exc.http_status)
        except Exception as exc:  # the stream has started: report in-band, never hang the client
            log.exception("chat completion stream failed")
            yield openai_error_body("internal_error", type(exc).__name__, 500)
        yield {"done": True}

    settings = request.app.state.settings
    return StreamingResponse(
        paced_stream(
            chunks(), render=render_openai_chunks, heartbeat_s=settings.server.sse_heartbeat_s,
            coalesce_s=settings.server.sse_coalesce_ms / 1000,
        ),
        media_type="text/event-stream", headers=SSE_HEADERS,
        background=BackgroundTask(ticket.close) if ticket else None,
    )
