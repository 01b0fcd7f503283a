"""The evidence check: the served chat model judges whether a passage supports an answer's sentence.

One batched prompt per answer lists the sentence/passage pairs that the fast path (near-verbatim
overlap, `grounding.Grounder`) did not settle, and asks YES or NO for each. The method is the
"LLM as a judge" of factual consistency (Zheng et al. 2023, "Judging LLM-as-a-judge", arXiv:2306.05685;
as a binary support question, the NLI-style prompt of Manakul et al. 2023, SelfCheckGPT's "prompt"
variant, arXiv:2303.08896). Measured on hand-written pairs (../shared/MODELS.md): Qwen2.5-Coder-1.5B
judged 8/10 English and 8/10 Chinese pairs right and never said YES to a contradicted statement.

A pair whose line the model does not write (a small model may stop early or loop) counts as NO: an
unanswered check never lets a sentence through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from assistant.core.llm import LLM, ChatMessage

JUDGE_SYSTEM = (
    "You check an assistant's statements against the passages they cite. A passage supports a statement "
    "only when it says the same thing. If the passage says the opposite (for example the passage says "
    "\"Do not use X\" and the statement says you can use X), or gives a different number or name, or does "
    "not mention it, the passage does not support the statement."
)
# Whether a passage answers a question (`EvidenceJudge.answers`): asked one passage per prompt. Batched with
# the statement pairs, Qwen2.5-Coder-1.5B said YES to 3 of 4 passages that do not answer (a name-change page
# for "How long should my password be?"); one per prompt, to none of them (and to 1 of 2 that do), so a YES
# lets an extractive quote through (docs/notes/answer-grounding-investigations.md, "Answers on the held-aside
# split").
ANSWERS_SYSTEM = (
    "You check whether a passage from the company's documents answers an employee's question. It answers "
    "only when it states what the question asks for (the value, the person, the steps). A passage on a "
    "related topic that does not state it does not answer."
)
JUDGE_INSTRUCTION = "For each pair: does the passage support the statement? Answer YES or NO."
# Tokens the reply may take per pair ("12: YES\n" is 5 tokens in Qwen's tokenizer), and a little more.
TOKENS_PER_PAIR = 6
_VERDICT = re.compile(r"(?im)^\W*(?:pair\s*)?(\d{1,3})\s*[:.)\-：]\s*\**\s*(yes|no|是|否)\b")


@dataclass(frozen=True)
class Pair:
    """One check: does `passage` (source text, a few sentences) support `sentence` (an answer's)?"""

    sentence: str
    passage: str


def judge_messages(pairs: Sequence[Pair]) -> list[ChatMessage]:
    """The chat prompt that asks for one verdict line per pair ("1: YES"). The instruction comes first
    and never varies, so that a server's prefix cache keeps it."""
    blocks = "\n\n".join(
        f"Pair {i}\nPassage: {' '.join(p.passage.split())}\nStatement: {' '.join(p.sentence.split())}"
        for i, p in enumerate(pairs, start=1)
    )
    example = "\n".join(f"{i}: YES or NO" for i in range(1, min(len(pairs), 2) + 1))
    user = f"{blocks}\n\n{JUDGE_INSTRUCTION} Reply with one line per pair, in order:\n{example}"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_verdicts(reply: str, n: int) -> list[bool]:
    """The `n` verdicts in a judge's `reply`: True for a line `i: YES` (or 是), False for NO, a missing
    line or a number out of range. The first line given for a pair counts."""
    verdicts: dict[int, bool] = {}
    for m in _VERDICT.finditer(reply or ""):
        i = int(m.group(1))
        if 1 <= i <= n and i not in verdicts:
            verdicts[i] = m.group(2).lower() in ("yes", "是")
    if not verdicts and n == 1:  # a bare "YES" for a single pair
        word = re.match(r"\W*(yes|no|是|否)\b", reply or "", re.IGNORECASE)
        verdicts[1] = bool(word) and word.group(1).lower() in ("yes", "是")
    return [verdicts.get(i, False) for i in range(1, n + 1)]


def answers_messages(question: str, passage: str) -> list[ChatMessage]:
    """The chat prompt asking whether `passage` answers `question` (YES or NO)."""
    user = (f"Question: {' '.join(question.split())}\nPassage: {' '.join(passage.split())}\n\n"
            "Does the passage answer the question? Reply YES or NO.")
    return [{"role": "system", "content": ANSWERS_SYSTEM}, {"role": "user", "content": user}]


class EvidenceJudge:
    """Judges sentence/passage pairs with a chat model, in one request per call.

    Args:
        llm: the served chat model (llama.cpp in process, or an OpenAI-compatible server such as vLLM).
        max_pairs: pairs per request; more are judged in further requests (a long prompt costs the
            small model accuracy and, on CPU, 15-35 ms a token).
    """

    def __init__(self, llm: LLM, *, max_pairs: int = 8):
        if max_pairs < 1:
            raise ValueError(f"max_pairs must be at least 1, got {max_pairs}")
        self.llm = llm
        self.max_pairs = max_pairs

    async def judge(self, pairs: Sequence[Pair]) -> list[bool]:
        """One verdict per pair, in order: True when the model answered YES (greedy decoding).

        Raises:
            UpstreamUnavailableError: the model server cannot be reached (from the backend).
        """
        out: list[bool] = []
        for start in range(0, len(pairs), self.max_pairs):
            batch = list(pairs[start : start + self.max_pairs])
            reply = await self.llm.complete(
                judge_messages(batch), max_tokens=TOKENS_PER_PAIR * len(batch) + 4, temperature=0.0
            )
            out += parse_verdicts(reply, len(batch))
        return out

    async def answers(self, question: str, passage: str) -> bool:
        """True when the model says YES, `passage` (a few source sentences) answers `question`; one
        request (greedy decoding, `answers_messages`).

        Raises:
            UpstreamUnavailableError: the model server cannot be reached (from the backend).
        """
        reply = await self.llm.complete(answers_messages(question, passage), max_tokens=3, temperature=0.0)
        return parse_verdicts(reply, 1)[0]
