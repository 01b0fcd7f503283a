"""LLM failures are counted by kind in `assistant_llm_errors_total` (what the dashboard's error panel plots)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from assistant.core.errors import UpstreamUnavailableError
from assistant.core.llm import ChatMessage
from assistant.core.llm.openai_compat import OpenAICompatLLM
from tests.conftest_llm_server import free_port


def _errors(kind: str) -> float:
    return REGISTRY.get_sample_value("assistant_llm_errors_total", {"kind": kind}) or 0.0


def test_a_refused_connection_then_the_open_circuit_are_counted():
    before = {kind: _errors(kind) for kind in ("connection", "unavailable", "circuit_open")}
    llm = OpenAICompatLLM(f"http://127.0.0.1:{free_port()}/v1", "assistant", connect_timeout_s=2.0,
                          connect_retries=0, breaker_failure_threshold=1, breaker_cooldown_s=60.0)
    question = [ChatMessage(role="user", content="hello")]
    for _ in range(2):  # refused (the breaker opens), then refused fast by the open breaker
        with pytest.raises(UpstreamUnavailableError):
            asyncio.run(llm.complete(question, max_tokens=4, temperature=0.0))
    grew = {kind: _errors(kind) - value for kind, value in before.items()}
    assert grew == {"connection": 1, "unavailable": 1, "circuit_open": 1}, grew
