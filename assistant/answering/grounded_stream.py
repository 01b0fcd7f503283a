"""A model's token stream turned into a checked answer, with its draft shown while it is written.

The deltas are split into sentences as they come (`SentenceBuffer`). With `draft` on (the web chat),
every delta is sent at once as a draft `token`, each completed sentence as a `sentence` event that
names it by index, then, once the generation ends and the evidence check ran (`Grounder.check`: one
judge call per answer), a `revise` event per sentence with its checked text ("" when withdrawn), or one
`replace` event when the whole answer is replaced (a quote of the best passage, or "not found").
Without `draft` (the OpenAI-compatible API, the CLI, the helpdesk: clients that cannot withdraw text),
only the checked answer is sent, as one `token` event.

Meanwhile a looping model is stopped (a sentence equal to an earlier one, or a repeated stretch,
`RepetitionGuard`), and the first sentence that states something is checked for the question's
language: on a mismatch the generation is restarted once with a firmer instruction (a draft already
shown is cleared by a `replace` event with empty text); if the retry is in the wrong language too, the
answer is kept with a short note saying so.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence

from assistant.answering.events import DraftSentence, Replace, Revise, Status, Token
from assistant.answering.grounding import (
    SENTENCE_BOUNDARY,
    Grounder,
    Sentence,
    Verdict,
    aconclude,
    drop_unknown_markers,
    segments,
    split_sentences,
    supported_share,
)
from assistant.answering.judge import EvidenceJudge
from assistant.answering.language_check import answer_lang_matches
from assistant.answering.markdown import tidy
from assistant.answering.prompt import firmer_language
from assistant.answering.stops import RepetitionGuard
from assistant.core.language import question_language
from assistant.core.llm import LLM, ChatMessage, StreamResult, Usage
from assistant.retrieval import RetrievedChunk

# Said before an answer that the model wrote in the sources' language twice (question's language).
LANGUAGE_NOTE = {
    "zh": "（模型未能用中文作答，以下为资料原文语言的回答。）",
    "en": "(The model could not answer in English; below is its answer in the sources' language.)",
}
# A character every match of `SENTENCE_BOUNDARY` holds (an end mark or a line break).
_END_CHAR = re.compile(r"[.!?\n。！？；]")
_LEADING_MARKERS = re.compile(r"(?:\s*\[\d+(?:\s*[,，]\s*\d+)*\])*\s*")


class SentenceBuffer:
    """Collects deltas and releases whole sentences (`Sentence`, with the markers written after them)."""

    def __init__(self) -> None:
        self.pending = ""

    def push(self, delta: str) -> list[Sentence]:
        """The sentences completed by `delta`: those followed by the start of a next sentence (text
        that is not a marker, which could still belong to the sentence before)."""
        self.pending += delta
        if _END_CHAR.search(self.pending) is None:  # no sentence end can be in it (most deltas)
            return []
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


def draft_text(sentence: Sentence) -> str:
    """A sentence as the draft shows it: its text, the markers the model wrote, its separator."""
    markers = "".join(f" [{n}]" for n in dict.fromkeys(sentence.markers))
    return f"{sentence.text}{markers}{sentence.sep or ' '}"


class GroundedStream:
    """Grounds one answer as it is generated.

    Args:
        question: the reader's question (its language is the answer's).
        grounder: attributes and checks sentences against the prompt's sources.
        draft: send the draft as it is written (`token`, `sentence`, `status`, `revise` events); else
            only the checked answer.

    After `events` is exhausted: `text` is the checked answer, `declined` True when it is "not found",
    `quoted` when a quote of a passage replaced the model's answer, `looped` when the repetition guard
    ended the generation, `retried` when the language retry ran, `verdicts` the checked sentences.
    """

    def __init__(self, question: str, grounder: Grounder, *, draft: bool = False):
        self.question = question
        self.lang = question_language(question)
        self.grounder = grounder
        self.draft = draft
        self.text = ""
        self.declined = False
        self.quoted = False
        self.looped = False
        self.retried = False
        self.verdicts: list[Verdict] = []
        self.sentences: list[Sentence] = []
        self._seen: set[str] = set()
        self._lang_checked = False
        self._note = False
        self._drafted = False

    async def events(
        self, generate: Callable[[list[ChatMessage]], AsyncIterator[str]], messages: list[ChatMessage],
        cut: Callable[[], bool] | None = None,
    ) -> AsyncIterator[Replace | Revise | DraftSentence | Status | Token]:
        """The answer's events (module docstring); the last one carries the checked text.

        Args:
            generate: messages -> the model's text deltas (an async generator, closed here when the
                answer ends early).
            messages: the prompt.
            cut: after the generation, True when it stopped at its token limit or at a caller's own stop
                sequence: then a short answer is not judged as a claim, and an answer cut before its
                first fact is kept as it is.

        Raises:
            UpstreamUnavailableError: the model server cannot be reached (generation or judge).
        """
        while True:
            try:
                async for event in self._run(generate, messages):
                    yield event
                break
            except _Restart:
                self.retried = True
                messages = firmer_language(messages, self.lang)
                if self._drafted:
                    yield Replace("")
        was_cut = cut is not None and cut()
        if self.draft:
            yield Status("checking", sentences=len(self.sentences))
        self.verdicts = await self.grounder.check(self.sentences, cut=was_cut)
        grounded = await aconclude(self.verdicts, self.grounder, lang=self.lang, cut=was_cut)
        self.declined, self.quoted = grounded.declined, grounded.quoted
        note = LANGUAGE_NOTE[self.lang] + "\n\n" if self._note and not grounded.declined else ""
        # A code block left open or a stray fence never reaches the reader (`markdown.tidy`): the draft's
        # sentences are then replaced by the balanced text as a whole.
        self.text = tidy(note + grounded.text)
        if not self.draft:
            yield Token(self.text)
        elif grounded.declined or grounded.quoted or note or self.text != "".join(segments(self.verdicts)).strip():
            yield Replace(self.text)  # the draft's sentences are not the text shown (tidied, quoted, declined)
        else:
            for i, text in enumerate(segments(self.verdicts)):
                yield Revise(i, text)

    async def _run(self, generate, messages: list[ChatMessage]) -> AsyncIterator[DraftSentence | Status | Token]:
        buffer = SentenceBuffer()
        guard = RepetitionGuard()
        stream = generate(messages)
        first = True
        try:
            async for delta in stream:
                # A delta may hold many tokens (one read of the server): the part before a loop is kept.
                looping = guard.push(delta)
                if looping:
                    delta = delta[: guard.loop_at]
                if self.draft and delta:
                    if first:
                        yield Status("writing")
                        first = False
                    self._drafted = True
                    yield Token(delta)
                for sentence in buffer.push(delta) if delta else ():
                    event = self._accept(sentence, buffer.pending)
                    if self.looped:
                        break
                    if event:
                        yield event
                if looping:
                    self.looped = True
                if self.looped:
                    break
        finally:
            await stream.aclose()
        if not self.looped:
            for sentence in buffer.flush():
                event = self._accept(sentence, "")
                if self.looped:
                    break
                if event:
                    yield event

    def _accept(self, sentence: Sentence, rest: str) -> DraftSentence | None:
        """Record `sentence`; the `sentence` event that shows it in the draft (None without `draft`).
        Sets `looped` on a repeated sentence.

        Raises:
            _Restart: the first claim of the first attempt is in the wrong language.
        """
        key = " ".join(sentence.text.lower().split())
        if key in self._seen and len(key) > 3:
            self.looped = True
            return None
        self._seen.add(key)
        n_sources = len(self.grounder.sources)
        sentence.markers = [n for n in sentence.markers if 1 <= n <= n_sources]
        sentence.text = drop_unknown_markers(sentence.text, n_sources)
        if not self._lang_checked and len(sentence.text) >= 12 and not sentence.text.rstrip().endswith((":", "：")):
            self._lang_checked = True
            if not answer_lang_matches(self.question, sentence.text):
                if not self.retried:
                    self._seen.clear()
                    self.sentences.clear()
                    self._lang_checked = False
                    raise _Restart()
                self._note = True
        self.sentences.append(sentence)
        if not self.draft:
            return None
        return DraftSentence(len(self.sentences) - 1, draft_text(sentence), rest)


def grounder_for(
    sources: Sequence[RetrievedChunk], question: str = "", *, topic: str = "", llm: LLM | None = None,
    translate: Callable[[str], object] | None = None,
) -> Grounder:
    """A `Grounder` for `sources` whose judge is `llm` (the served chat model; None = no judge: near
    copies and lexical overlap only), with the retriever's dictionary translation `translate`
    (`Retriever.translate`, None when `ASSISTANT_QUERY_TRANSLATION` is off) to attribute a sentence in
    the other language than its source. `topic`: what the answer must be about
    (`Grounder.off_the_question`), default `question`."""
    return Grounder(
        sources, judge=EvidenceJudge(llm) if llm is not None else None, translate=translate, question=question,
        topic=topic,
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


def grounding_report(verdicts: list[Verdict], *, quoted: bool = False) -> dict:
    """What grounding made of an answer, for callers that weigh it (the helpdesk's confidence):
    `{"supported_share": float in [0, 1], "sentences": int, "removed": int (claims removed as unsupported),
    "judged": int (pairs the model judged), "copies": int (sentences supported as near-copies)}`; a
    `quoted` answer (the source's own sentence, which the judge said answers) is supported whole. The
    removed sentences themselves are never in it: they were judged unsupported, and no reader, agent or
    ticket system gets them (issue 42: a ticket's reasons carried a withdrawn draft sentence)."""
    return {
        "supported_share": 1.0 if quoted else round(supported_share(verdicts), 4),
        "sentences": len(verdicts),
        "removed": sum(1 for v in verdicts if v.claim and not v.echo and v.source is None),
        "judged": sum(1 for v in verdicts if v.by == "judge"),
        "copies": sum(1 for v in verdicts if v.by == "copy"),
    }
