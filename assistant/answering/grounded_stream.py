"""A model's token stream turned into a grounded answer, streamed sentence by sentence.

The current sentence is held back until it ends; then it is checked (`Grounder.judge`) and, if some
source supports it, sent with that source's marker; unsupported sentences and echoes of the system
prompt are never shown. Meanwhile:

- a looping model is stopped: a sentence equal to an earlier one, or a stretch repeated
  (`RepetitionGuard`), ends the generation (the answer's `finish_reason` stays "stop");
- the first sentence that states something is checked for the question's language: on a mismatch,
  before anything was sent, the generation is restarted once with a firmer instruction; if the retry
  is in the wrong language too, the answer is kept with a short note saying so.

When the supported sentences hold too little of the answer (`grounding.declines`), or share no word
with the question (`Grounder.off_the_question`), the answer is declined: `NO_ANSWER` is sent as a token when nothing was sent before, else as a `replace` event whose
`text` replaces everything sent so far.
"""

from __future__ import annotations

import asyncio
import re
from typing import AsyncIterator, Callable

from assistant.answering.grounding import (
    SENTENCE_BOUNDARY, Grounder, Renderer, Sentence, Verdict, declines, drop_unknown_markers, judged_as_claims,
    render, split_sentences, supported_share,
)
from assistant.answering.language_check import answer_lang_matches
from assistant.answering.prompt import NO_ANSWER, firmer_language
from assistant.core.language import question_language
from assistant.answering.stops import RepetitionGuard
from assistant.core.llm import ChatMessage, StreamResult, Usage

# Said before an answer that the model wrote in the sources' language twice (question's language).
LANGUAGE_NOTE = {
    "zh": "（模型未能用中文作答，以下为资料原文语言的回答。）",
    "en": "(The model could not answer in English; below is its answer in the sources' language.)",
}
_LEADING_MARKERS = re.compile(r"(?:\s*\[\d+(?:\s*[,，]\s*\d+)*\])*\s*")


class SentenceBuffer:
    """Collects deltas and releases whole sentences (`Sentence`, with the markers written after them)."""

    def __init__(self) -> None:
        self.pending = ""

    def push(self, delta: str) -> list[Sentence]:
        """The sentences completed by `delta`: those followed by the start of a next sentence (text
        that is not a marker, which could still belong to the sentence before)."""
        self.pending += delta
        cut = -1
        for m in SENTENCE_BOUNDARY.finditer(self.pending):
            rest = self.pending[m.end() :]
            lead = _LEADING_MARKERS.match(rest)
            if lead.end() < len(rest) and rest[lead.end()] != "[":
                cut = m.end() + lead.end()
        if cut <= 0:
            return []
        done, self.pending = self.pending[:cut], self.pending[cut:]
        return split_sentences(done)

    def flush(self) -> list[Sentence]:
        """The rest, at the end of the stream."""
        done, self.pending = self.pending, ""
        return split_sentences(done)


class _Restart(Exception):
    """The first sentence is in the wrong language: generate again with a firmer instruction."""


class GroundedStream:
    """Grounds one answer as it is generated.

    Args:
        question: the reader's question (its language is the answer's).
        grounder: attributes sentences to the prompt's sources.
        judge_in_thread: run `Grounder.judge` in a worker thread (it may embed the sentence).

    After `events` is exhausted: `text` is the grounded answer (the concatenation of the sent tokens,
    or the `replace` text), `declined` is True when it is `NO_ANSWER`, `looped` when the repetition
    guard ended the generation, `retried` when the language retry ran, `verdicts` the checked sentences.
    """

    def __init__(self, question: str, grounder: Grounder, *, judge_in_thread: bool = True):
        self.question = question
        self.lang = question_language(question)
        self.grounder = grounder
        self.judge_in_thread = judge_in_thread
        self.text = ""
        self.declined = False
        self.looped = False
        self.retried = False
        self.verdicts: list[Verdict] = []
        self._seen: set[str] = set()
        self._lang_checked = False
        self._note = False
        self._sent: list[str] = []
        self._renderer = Renderer()

    async def events(
        self, generate: Callable[[list[ChatMessage]], AsyncIterator[str]], messages: list[ChatMessage],
        cut: Callable[[], bool] | None = None,
    ) -> AsyncIterator[dict]:
        """`{"type": "token", "text"}` per sentence kept, and at most one `{"type": "replace", "text"}`.

        Args:
            generate: messages -> the model's text deltas (an async generator, closed here when the
                answer ends early).
            messages: the prompt.
            cut: after the generation, True when it stopped at its token limit or at a caller's own stop
                sequence: then no short answer is judged as a claim, and a lead-in held
                back (`Renderer`) is sent as it is, as any answer cut before its first fact is.
        """
        while True:
            try:
                async for text in self._run(generate, messages):
                    yield {"type": "token", "text": text}
                break
            except _Restart:
                self.retried = True
                messages = firmer_language(messages, self.lang)
        was_cut = cut is not None and cut()
        if was_cut:
            rest = self._renderer.release()
            if rest:
                self._sent.append(rest)
                yield {"type": "token", "text": rest}
        self.text = "".join(self._sent)
        rejudged = None if was_cut else await self._judged_as_claims()
        if rejudged is not None:  # a short answer: now cited, or declined below
            self.verdicts = rejudged
            self.text = render(rejudged)
        if declines(self.verdicts, self.text, cut=was_cut) or self.grounder.off_the_question(self.verdicts):
            self.declined = True
            self.text = NO_ANSWER[self.lang]
            yield {"type": "replace" if self._sent else "token", "text": self.text}
        elif rejudged is not None and self.text != "".join(self._sent):
            yield {"type": "replace" if self._sent else "token", "text": self.text}

    async def _judged_as_claims(self) -> list[Verdict] | None:
        if self.judge_in_thread:
            return await asyncio.to_thread(judged_as_claims, self.verdicts, self.grounder)
        return judged_as_claims(self.verdicts, self.grounder)

    async def _run(self, generate, messages: list[ChatMessage]) -> AsyncIterator[str]:
        buffer = SentenceBuffer()
        guard = RepetitionGuard()
        stream = generate(messages)
        try:
            async for delta in stream:
                if guard.push(delta):
                    self.looped = True
                    break
                for sentence in buffer.push(delta):
                    text = await self._accept(sentence)
                    if self.looped:
                        break
                    if text:
                        yield text
                if self.looped:
                    break
        finally:
            await stream.aclose()
        if not self.looped:
            for sentence in buffer.flush():
                text = await self._accept(sentence)
                if self.looped:
                    break
                if text:
                    yield text

    async def _accept(self, sentence: Sentence) -> str:
        """The text to send for `sentence` ("" when it is dropped); sets `looped` on a repeated sentence.

        Raises:
            _Restart: the first claim of the first attempt is in the wrong language.
        """
        key = " ".join(sentence.text.lower().split())
        if key in self._seen and len(key) > 3:
            self.looped = True
            return ""
        self._seen.add(key)
        sentence.markers = [n for n in sentence.markers if 1 <= n <= len(self.grounder.sources)]
        sentence.text = drop_unknown_markers(sentence.text, len(self.grounder.sources))
        if self.judge_in_thread:
            verdict = await asyncio.to_thread(self.grounder.judge, sentence)
        else:
            verdict = self.grounder.judge(sentence)
        if verdict.claim and not verdict.echo and not self._lang_checked:
            self._lang_checked = True
            if not answer_lang_matches(self.question, sentence.text):
                if not self.retried and not self._sent:
                    self._seen.clear()
                    self.verdicts.clear()
                    self._renderer = Renderer()
                    raise _Restart()
                self._note = True
        self.verdicts.append(verdict)
        text = self._renderer.add(verdict)
        if text and not self._sent and self._note:
            text = LANGUAGE_NOTE[self.lang] + "\n\n" + text
        if text:
            self._sent.append(text)
        return text


def grounder_for(retriever, sources, question: str = "", *, topic: str = "") -> Grounder:
    """A `Grounder` for `sources` that uses `retriever`'s embedding model when it has one and its query
    translation (`translate`, None when `ASSISTANT_QUERY_TRANSLATION` is off).

    The product's retriever holds a `QueryBatcher` (questions only); the model it wraps (`.embedder`)
    embeds the answer's sentences and the sources here. Without an embedding model (a retriever without
    `embedder`, or one that cannot embed passages) grounding is lexical alone: then a paraphrase under
    `MIN_LEXICAL` and every sentence in the other language than its source are unsupported, so that,
    for instance, every Chinese answer about English pages is declined. `question`: the reader's
    (`Grounder`'s polarity check of a yes or no that restates it); `topic`: what the answer must be
    about (`Grounder.off_the_question`), default `question`."""
    embedder = getattr(retriever, "embedder", None)
    if not hasattr(embedder, "embed_passages"):
        embedder = getattr(embedder, "embedder", embedder)  # the model behind a `QueryBatcher`
    queries = getattr(embedder, "embed_queries", None)
    passages = getattr(embedder, "embed_passages", None)
    return Grounder(
        sources, embed_queries=queries, embed_passages=passages, embedder_name=str(getattr(embedder, "name", "")),
        translate=getattr(retriever, "translate", None), question=question, topic=topic,
    )


def combined_result(attempts: list[StreamResult]) -> StreamResult:
    """One `StreamResult` for the generations of an answer (a language retry makes two): the last
    one's finish reason ("stop" when none ran), the usages summed."""
    if not attempts:
        return StreamResult(finish_reason="stop")
    usage = Usage(
        sum(a.usage.prompt_tokens for a in attempts), sum(a.usage.completion_tokens for a in attempts)
    )
    return StreamResult(finish_reason=attempts[-1].finish_reason or "stop", usage=usage)


def grounding_report(verdicts: list[Verdict]) -> dict:
    """What grounding made of an answer, for callers that weigh it (the helpdesk's confidence):
    `{"supported_share": float in [0, 1], "sentences": int, "unsupported": [sentence texts removed]}`.
    Echoes of the system prompt are removed too but not listed: they state nothing about the question."""
    return {
        "supported_share": round(supported_share(verdicts), 4),
        "sentences": len(verdicts),
        "unsupported": [v.sentence.text for v in verdicts if v.claim and not v.echo and v.source is None],
    }
