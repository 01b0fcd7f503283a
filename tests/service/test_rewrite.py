"""Follow-up rewriting with a real model server (llama.cpp standing in for vLLM), and its fallback."""

from __future__ import annotations

import asyncio

from assistant.answering.rewrite import rewrite_query
from assistant.core.llm.openai_compat import OpenAICompatLLM
from tests.conftest_llm_server import free_port

HISTORY = [
    {"role": "user", "content": "What is the laptop policy for new employees?"},
    {"role": "assistant", "content": "New employees get a MacBook Pro [1]."},
]


def test_the_model_rewrites_a_follow_up_into_one_line(llm_server):
    async def scenario() -> str:
        llm = OpenAICompatLLM(llm_server.base_url, "assistant", read_timeout_s=120)
        try:
            return await rewrite_query("And for contractors?", HISTORY, llm=llm, timeout_s=120)
        finally:
            await llm.aclose()

    query = asyncio.run(scenario())
    assert query.strip() and "\n" not in query and len(query) <= 400


def test_an_unreachable_model_falls_back_to_the_rule():
    async def scenario() -> str:
        llm = OpenAICompatLLM(f"http://127.0.0.1:{free_port()}/v1", "assistant", connect_retries=0)
        try:
            return await rewrite_query("And for contractors?", HISTORY, llm=llm)
        finally:
            await llm.aclose()

    assert asyncio.run(scenario()) == "What is the laptop policy for new employees? And for contractors?"


def test_without_earlier_user_turns_the_question_is_kept():
    assert asyncio.run(rewrite_query("And for contractors?", [])) == "And for contractors?"
