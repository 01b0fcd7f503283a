"""The llama.cpp backend evaluates the stable prompt prefix (chat template + system prompt) once: later
prompts evaluate only what follows it, also after a prompt with another system prompt came in between.
Counted with llama.cpp's own prompt-token counter (`llama_perf_context().n_p_eval`), on SmolLM2-135M."""

from __future__ import annotations

import asyncio

import llama_cpp  # noqa: E402

from assistant.answering.prompt import SYSTEM_PROMPT
from assistant.core.llm.base import StreamResult
from assistant.core.llm.llama_cpp import MIN_STABLE_PREFIX_TOKENS, LlamaCppLLM  # before llama_cpp: OMP_WAIT_POLICY
from assistant.core.llm.model_files import smollm2_gguf_path

SYSTEM = {"role": "system", "content": SYSTEM_PROMPT}


def evaluate(llm: LlamaCppLLM, messages: list) -> tuple[int, int]:
    """(prompt tokens, prompt tokens llama.cpp evaluated for them) of one 2-token answer."""
    ctx = llm._llama._ctx.ctx
    before = llama_cpp.llama_perf_context(ctx).n_p_eval
    result = StreamResult()

    async def run() -> None:
        async for _ in llm.stream(messages, max_tokens=2, temperature=0.0, result=result):
            pass

    asyncio.run(run())
    return result.usage.prompt_tokens, llama_cpp.llama_perf_context(ctx).n_p_eval - before


def test_the_system_prompt_is_evaluated_once_and_kept_across_other_prompts():
    llm = LlamaCppLLM(smollm2_gguf_path(), context_tokens=1024, threads=1)
    first, evaluated = evaluate(llm, [SYSTEM, {"role": "user", "content": "Sources: none. Question: what is 2 + 2?"}])
    assert evaluated >= first - 1  # a cold context evaluates the whole prompt (llama.cpp may count one less)
    prompt, evaluated = evaluate(llm, [SYSTEM, {"role": "user", "content": "Sources: none. Question: name a colour."}])
    prefix = len(llm._prefix_tokens)
    assert prefix >= MIN_STABLE_PREFIX_TOKENS
    assert SYSTEM_PROMPT in llm._llama.detokenize(llm._prefix_tokens).decode("utf-8", errors="replace")
    assert evaluated <= prompt - prefix + 1, (prompt, prefix, evaluated)  # the shared start was not evaluated again

    evaluate(llm, [{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Hello!"}])
    prompt, evaluated = evaluate(llm, [SYSTEM, {"role": "user", "content": "Sources: none. Question: who are you?"}])
    assert evaluated <= prompt - prefix + 1, (prompt, prefix, evaluated)  # restored from the saved state


def test_the_same_prompt_asked_again_is_answered_again():
    """A retry sends the very prompt of the request before: its whole prompt is the shared prefix, and
    cutting the context back to all of it left nothing to evaluate, so the retry was answered with ''."""
    llm = LlamaCppLLM(smollm2_gguf_path(), context_tokens=1024, threads=1)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "What is the capital of France?"}]
    answers = [asyncio.run(llm.complete(messages, max_tokens=12, temperature=0.0)) for _ in range(4)]
    assert answers[0] and answers == [answers[0]] * 4
