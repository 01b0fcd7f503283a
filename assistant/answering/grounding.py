"""Grounded answers by construction: every sentence kept is attributed to a source that supports it.

A small chat model rarely writes `[n]` markers, sometimes writes markers that name no source, and
invents facts when its sources hold none. Citing and declining are therefore decided here, not by the
model:

1. The answer is split into sentences (English `.!?` followed by white space, Chinese `。！？；`, and
   line breaks, so that each list item is one sentence); a marker written after a sentence's end
   belongs to that sentence.
2. Markers that name no source (`[7]` with five sources) are dropped.
3. Each sentence is scored against each source (the whole chunk when the prompt held a focused passage
   of it, `support_text`): lexical support (share of the sentence's content terms found in the source:
   English words, Chinese character bigrams, after NFKC normalisation) and, when an embedder is
   given, the cosine similarity of their embeddings. A sentence is supported when its best source
   passes the thresholds below and every number it states occurs in that source; it then carries that
   source's marker (the model's own marker is kept when the source it names also supports the
   sentence). Sentences no source supports are removed, as are echoes of the system prompt.
4. When the supported sentences hold less than `MIN_SUPPORTED_SHARE` of the answer's claim
   characters, or none of them shares a word with the question (`Grounder.off_the_question`: supported,
   but about something else), the whole answer is declined with the product's `NO_ANSWER` text.

`GroundedStream` applies this to a token stream sentence by sentence (the current sentence is held back
until it ends), stops a looping model, and checks the answer's language on its first sentence.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from assistant.answering.injection import without_instructions
from assistant.answering.language_check import MIN_CJK_SHARE_ZH
from assistant.core.language import QUESTION_WORDS_ZH, cjk_share
from assistant.answering.polarity import ListPolarity, source_statements
from assistant.answering.prompt import NO_ANSWER, SYSTEM_PROMPT
from assistant.answering.units import currency_as_in_sources, english_time_units_agree, units_agree
from assistant.core import sparse
from assistant.retrieval import RetrievedChunk

# --- thresholds (calibrated with bench/calibrate_grounding.py on the development questions' pages) ----
# Lexical support alone: at least 60% of a sentence's content terms occur in one source. Measured (prose
# sentences of the answering page against it plus 4 pages of its folder, 322 en / 390 zh; unsupported:
# 252 en / 721 zh sentences of other pages of the same folder): accepted at 0.6 are 100% of copied
# sentences, 99.1% (en) / 94.1% (zh) of reworded ones (a third dropped, foreign words added), and
# 10.3% / 9.6% of the unsupported ones (many of those say what the sources also say: "Please reach out
# to the People Team with questions"); at 0.5: 23% / 19% unsupported; at 0.7: 96% / 85% reworded.
MIN_LEXICAL = 0.6
# With embeddings: a weaker lexical overlap (a paraphrase) is accepted when the sentence is closest to
# that source among all sources and its cosine passes a floor; the lexical floor keeps the embedding to
# deciding between sentences that share words with the passage (the unsupported sentences' median
# lexical support is 0.33 en / 0.28 zh). Sentence-to-passage cosines of multilingual-e5-small (int8,
# `query:` / `passage:`) are compressed: on the calibration's pages, reworded sentences against their
# passage have median 0.859 en / 0.899 zh, unsupported ones against the closest passage 0.818 / 0.884;
# so the absolute floor only removes the clearly unrelated (0.80: 98% / 100% of reworded pass), and
# the choice of the closest source does the rest: for 11 Chinese renderings of handbook sentences
# against 7 pages, the right page was the closest for 9. MiniLM's floor (0.55, its usual paraphrase
# level) is not calibrated here; MiniLM cannot embed Chinese, so a Chinese sentence about an English
# page is then unsupported (declined) whatever its translation shares with the page.
# Re-fitted on Qwen2.5-Coder-1.5B's own answers (bench/capture_answers.py + ground_answers.py, 16
# development questions): at 0.35, invented steps of a no-answer question ("Open the Devices section in
# Jamf", lexical 0.40, cosine 0.83-0.84 against a Jamf page) were kept; every paraphrase the model
# wrote of a real answer had lexical support of at least 0.50 (cosine 0.83-0.91).
MIN_LEXICAL_WITH_EMBEDDING = 0.45
MIN_COSINE = {"default": 0.55, "e5": 0.80}
# Across languages (a Chinese sentence, an English source): share of the sentence's words found in the
# source in either language, through the dictionary translation (`Translation.coverage`). It is only a
# floor for the embedding check: on 11 Chinese renderings of handbook sentences against their page and
# 6 pages of the same folders, the right page scored highest for 3 of the 11 and tied for 3 more
# (dictionary senses match any page on devices or passwords); its coverage was 0.5-0.89 for 10 of them.
MIN_CROSS_LINGUAL = 0.5
# The floor for a sentence whose numbers the source states, every one of them, or which names what the
# source names (a channel, a tool) beyond the question's words: a number or a name matched is evidence
# the dictionary cannot give. Fresh-user trials: "停车场9点以后收费7欧元。" (coverage 0.43: 点 is
# "point" where the page says "9am", 欧元 "euro" where it says "EUR") and "笔记本电脑闲置10分钟后屏幕要自动锁定。"
# (0.44: "inactivity", not "idle") were right and removed. On `bench/calibrate_crosslingual.py`'s 12
# unsupported sentences it keeps none (none states a number of its pages).
MIN_CROSS_LINGUAL_WITH_NUMBERS = 0.4
# Across languages the embedding must be surer than within one. bench/calibrate_crosslingual.py (7
# handbook pages as sources; 11 faithful Chinese renderings of their sentences, 12 Chinese sentences on
# the same topics that no page states): at the within-language floor of 0.80, 8 faithful kept (5 on
# their own page) and 3 unsupported kept (cosines 0.801-0.819: "old laptops may be taken home free");
# at 0.82, 6 faithful kept (the same 5 on their own page: 0.825-0.852) and no unsupported one. A wrong
# Chinese answer of Qwen 1.5B had reached an English page at 0.871 (docs/benchmarks.md), above this
# floor too: the rule on names in `judge` is the other check across languages.
MIN_COSINE_ACROSS = {"default": 0.55, "e5": 0.82}
# A sentence with fewer content terms than this carries no claim to check ("Yes.", "Steps:"): it is
# kept when the answer around it is, and does not count towards the supported share.
MIN_CLAIM_TERMS = 3
# Decline when less than half of the answer's claims (by characters) is supported: a mostly invented
# answer with one supported sentence would still mislead (the trial: SmolLM2 answered
# "12 characters max" beside a correct sentence).
MIN_SUPPORTED_SHARE = 0.5
# An answer sentence restates the source sentence that holds at least this share of its terms; then
# their polarity must agree (`polarity.py`).
MIN_RESTATEMENT = 0.6
# A supported answer with fewer index terms than this is never judged off the question: a bare value
# ("5分钟", "Airbase", "$50") answers a question without repeating its words.
MIN_TOPIC_TERMS = 5
# A yes or no in the question's words is supported only by one source statement that holds this share of
# its terms (`Grounder.says_it`): "Yes, the company gives employees a company car." found 0.25 in the
# travel page's rental-car sentences; "No, you should not use public WiFi when travelling with your work
# laptop." finds 0.5 in "Avoid public WiFi networks, and use a VPN if you must connect to one."
MIN_STATED = 0.5
# A sentence that shares this much of its terms with one sentence of the system prompt is an echo.
MIN_ECHO_OVERLAP = 0.6

_MARKER = re.compile(r"\s*\[(\d+(?:\s*[,，]\s*\d+)*)\]")
_SPACED_MARKER = re.compile(r"([ \t]*)\[(\d+(?:\s*[,，]\s*\d+)*)\]")
_ANY_MARKER = re.compile(r"\[(\d+(?:\s*[,，]\s*\d+)*)\]")
# A source cited by its file name in brackets ("[Yubikey-faq.md]", "[source: passwords.md]"): the model's
# own form of a citation, which names no numbered source and is never checked.
# The placeholder of the prompt's reminder ("with [n] after each sentence"), copied as it is (fresh-user
# trial, fifth session: an answer ended with "6. [n]").
_PLACEHOLDER_MARKER = re.compile(r"[ \t]*\[n\]")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*")
_FILE_CITATION = re.compile(
    r"[ \t]*\[[^\[\]\n]{0,200}\.(?:md|mdx|markdown|txt|rst|html?|pdf|docx?|xlsx?|pptx?|csv|eml|msg|json|ya?ml)\]",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9_\-.]*[a-z0-9]|[a-z0-9]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Yes/no questions: an English one opens with an auxiliary verb ("Should I use public WiFi when …?", whose
# "when" asks nothing); a Chinese one holds no interrogative (多少, 什么, 哪, 几, …).
_YES_NO_EN = re.compile(
    r"^\W*(?:do|does|did|is|are|was|were|am|can|could|should|would|will|shall|may|might|must|have|has|had)\b",
    re.IGNORECASE,
)
_INTERROGATIVE_ZH = re.compile(r"什么|哪|谁|几|多少|多久|多长|多大|怎么|怎样|如何|为什么|为何")


def is_yes_no_question(question: str) -> bool:
    """True for a question that asks yes or no (`_YES_NO_EN`, `_INTERROGATIVE_ZH`), not which value."""
    if cjk_share(question) >= MIN_CJK_SHARE_ZH:
        return not _INTERROGATIVE_ZH.search(question)
    return bool(_YES_NO_EN.search(question))


_VALUE = re.compile(r"[\d.,/:+()-]+")
_NUMBER_WITH_UNIT = re.compile(r"(\d+(?:[.,]\d+)*)([a-z]+)")
# Abbreviated units as handbooks write them after a number, and their words as `content_terms` keeps them
# (a plural's "s" is taken off afterwards: "years" is "year").
_UNIT_ABBREVIATIONS = {
    "yr": "year", "yrs": "year", "mos": "month", "wk": "week", "wks": "week", "hrs": "hour", "mins": "minute",
    "secs": "second",
}  # not "hr" (HR), "min" (minimum), "sec" (security), "mo"
_UNITS = frozenset(_UNIT_ABBREVIATIONS) | {f"{u}{s}" for u in ("year", "month", "week", "day", "hour", "minute") for s in ("", "s")}
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
# Sentence ends: English terminal punctuation before white space, Chinese terminal punctuation, lines.
SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])\s*|\s*\n\s*")
_NOT_AN_END = re.compile(r"(?:^\s*(?:[-*]\s*)?(?:\d{1,2}|[a-zA-Z])\.|\b(?:e\.g|i\.e|etc|vs|cf|approx|Mr|Ms|Dr|No)\.)$")
# A sentence that only announces what follows ("You can migrate it as follows:", "步骤如下：").
_LEAD_IN = re.compile(r"[:：]\s*$")
_QUESTION = re.compile(r"[?？][\s)）\]】\"”'’]*$")
# A sentence left pointing at nothing once its marker or bracketed file name is taken off ("This is
# detailed in [passwords.md].", "For more details, see [2].", "详见[1]。"): it ends in a verb of referring.
_DANGLING = re.compile(
    r"(?:\b(?:(?:detailed|described|explained|outlined|documented|covered|mentioned|listed|found|available|shown|"
    r"specified|stated|provided|included|contained|given)\s+(?:in|at|on|under|from)|see|refer\s+to)"
    r"|详见|参见|参考|参阅|请见)\s*[.。:：]?\s*$",
    re.IGNORECASE,
)
# A sentence whose verb "to be" ends it once its marker is taken off: the model put the source's number
# where the fact belongs ("The minimum TLS version for … the public internet is [1]."; "…的密码是[1]。").
_HOLLOW = re.compile(r"(?:\b(?:is|are|was|were|be)|(?<![不就])是|为)\s*([.。:：]?)\s*$", re.IGNORECASE)
_ENUMERATOR = re.compile(r"^\s*(?:[-*]\s*)?\d{1,2}[.)、](?!\d)\s*")  # "2." of a list, not of "2.5 years"
_STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being
    it its this that these those there here you your we our they their he she his her i me my do does did
    not no yes can could should would will may might must shall have has had about into over than so such
    also just only any all each more most other some very what which who whom when where why how""".split()
)


def content_terms(text: str) -> set[str]:
    """The terms that carry a sentence's meaning: lower-cased English words and numbers without stop
    words, and the character bigrams of each Chinese run (a single ideograph when the run has one).
    The text is NFKC-normalised first, so that full-width digits and letters (`５０００`, `ＴｉＤＢ`), which
    Chinese text often uses, are the same terms as their ASCII forms. A hyphenated word also counts
    without its hyphens ("auto-fill", "autofill"). A number written with its unit ("2.5yrs", "10min") is
    also the number and the unit, and a unit's abbreviation is its word (yrs: year), so that "2.5 years"
    finds the page's "Engineering and Product : 2.5yrs" (fresh-user trial: that right answer was removed)."""
    text = _ANY_MARKER.sub(" ", unicodedata.normalize("NFKC", text))
    terms = {w.lower().rstrip(".") for w in _WORD.findall(text)}
    terms |= {t.replace("-", "") for t in terms if "-" in t}  # "auto-fill" is also "autofill"
    for term in list(terms):  # "2.5yrs" is also "2.5" and "year"
        glued = _NUMBER_WITH_UNIT.fullmatch(term)
        if glued and glued.group(2) in _UNITS:
            terms |= set(glued.groups())
    terms = {_UNIT_ABBREVIATIONS.get(t, t) for t in terms}
    terms = {t[:-1] if len(t) > 3 and t.endswith("s") else t for t in terms if t not in _STOPWORDS}
    for run in _CJK_RUN.findall(text):
        terms.update([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
    return terms


def support_text(source: RetrievedChunk) -> str:
    """The text a source's support is counted on: the whole chunk (`full_text`) when the prompt held a
    focused passage of it, else its `text`. The model was shown only the passage, but a faithful
    sentence about it is often worded with terms of the sentences around it (a 100-token passage held
    0.42 of a correct Chinese answer's bigrams, its chunk 0.50), and a sentence the chunk supports
    states nothing the reader's cited page does not. Text planted for the assistant is not support
    (`injection.without_instructions`, as in the prompt): a planted answer the model repeats stays
    unsupported even where the filter's cut and the model's words meet."""
    return without_instructions(source.full_text or source.text)


def is_lead_in(text: str) -> bool:
    """True for a sentence that ends in a colon (markers aside): it announces what follows and states
    nothing by itself, so it is no claim, and it is shown only when a supported sentence follows it
    (`Renderer`). A model that writes a lead-in and stops (seen: "你可以通过以下方式将 Cassandra 的数据迁移到
    TiDB：" for a question the sources do not answer) has then said nothing, and the answer is declined."""
    return bool(_LEAD_IN.search(_ANY_MARKER.sub("", text)))


def is_question(text: str) -> bool:
    """True for a sentence that ends in a question mark (markers and closing brackets aside): an answer
    that asks states nothing, and is no answer when it only repeats the question (seen: "入职第一天怎么激活
    Okta 账号[1]？(How do you activate your Okta account on the first day of employment?) [1]", the
    question and the translation the prompt showed, kept as supported: their words are the page's)."""
    return bool(_QUESTION.search(_ANY_MARKER.sub("", text)))


def is_dangling(text: str) -> bool:
    """True for a sentence that, without its markers, ends in a verb of referring ("see", "refer to",
    "详见") or a participle of one with its preposition ("detailed in", "found at"): "This is detailed
    in.", "For more details, see.", "详见。". `Grounder.judge` removes one with fewer than
    `MIN_CLAIM_TERMS` content terms: it only pointed at a source, which the citations list shows
    anyway, and as no claim it gets no marker, so that it reads as a fragment (fresh-user trial: "This
    is detailed in." after "[Yubikey-faq.md]" was removed)."""
    return bool(_DANGLING.search(_ANY_MARKER.sub("", text)))


def is_hollow(sentence: Sentence) -> bool:
    """True for a sentence that, without its markers, ends in a form of "to be" ("… is [1].", "…是[1]。")
    after which a marker or its end stood: the model wrote the source's number in place of the fact (3 of
    19 English answers of a development capture, "The minimum TLS version for confidential web traffic
    over the public internet is [1]."), so it states nothing. An answer cut there at its token limit
    ("Passwords should be") is not hollow. `Grounder.judge` removes a hollow sentence like an echo."""
    m = _HOLLOW.search(_ANY_MARKER.sub("", sentence.text))
    return bool(m) and bool(m.group(1) or sentence.markers)


def numbers_in(text: str) -> set[str]:
    """The numbers a text states (`15`, `1,400`, `3.5`), digits only; markers and a list item's
    number (`2. Turn on ...`) excluded; full-width digits read as ASCII (NFKC)."""
    text = _ENUMERATOR.sub("", _ANY_MARKER.sub(" ", unicodedata.normalize("NFKC", text)))
    return {re.sub(r"[.,]", "", n) for n in _NUMBER.findall(text)}


@dataclass
class Sentence:
    """One sentence of an answer: `text` without markers, the marker numbers the model wrote after or in
    it, and `sep`, the white space that followed it in the answer."""

    text: str
    markers: list[int]
    sep: str = ""


def split_sentences(answer: str) -> list[Sentence]:
    """Sentences of `answer` in order; markers that follow a sentence's end are that sentence's."""
    pieces: list[tuple[str, str]] = []
    pos = 0
    for m in SENTENCE_BOUNDARY.finditer(answer):
        if m.end() == pos and not m.group():
            continue
        pieces.append((answer[pos : m.start()], m.group()))
        pos = m.end()
    if pos < len(answer):
        pieces.append((answer[pos:], ""))
    merged: list[tuple[str, str]] = []
    for text, sep in pieces:  # "1. Item", "e.g. this": not sentence ends
        if merged and _NOT_AN_END.search(merged[-1][0]) and "\n" not in merged[-1][1]:
            merged[-1] = (merged[-1][0] + merged[-1][1] + text, sep)
        else:
            merged.append((text, sep))
    sentences: list[Sentence] = []
    for text, sep in merged:
        lead = re.match(r"(?:\s*\[\d+(?:\s*[,，]\s*\d+)*\])+", text)
        if lead and sentences:  # "Fact. [1] Next": the marker closes the previous sentence
            sentences[-1].markers += [int(n) for n in re.findall(r"\d+", lead.group())]
            rest = text[lead.end() :]
            text = rest.lstrip()
            if not text:
                sentences[-1].sep = rest + sep
                continue
        markers = [int(n) for g in _ANY_MARKER.findall(text) for n in re.findall(r"\d+", g)]
        clean = _MARKER.sub("", text).strip()
        if clean or markers:
            sentences.append(Sentence(clean, markers, sep))
        elif sentences:
            sentences[-1].sep += sep
    return [s for s in sentences if s.text]


def drop_unknown_markers(answer: str, n_sources: int) -> str:
    """`answer` without the marker numbers that name no source (1..`n_sources`); a marker left empty
    is removed with the space before it, and so are a file name in brackets ("[Yubikey-faq.md]", seen
    after a cited sentence on bench/bench_crosslingual_answers.py) and the prompt's placeholder "[n]"."""

    def keep(m: re.Match) -> str:
        numbers = [n for n in re.findall(r"\d+", m.group(2)) if 1 <= int(n) <= n_sources]
        return f"{m.group(1)}[{', '.join(numbers)}]" if numbers else ""

    return _SPACED_MARKER.sub(keep, _PLACEHOLDER_MARKER.sub("", _FILE_CITATION.sub("", answer)))


@dataclass
class Verdict:
    """How one sentence fared: `source` is the 1-based number of the source that supports it (None when
    none does); `claim` is False for a sentence too short to state a checkable fact; `echo` is True for
    a sentence that repeats the system prompt or a source's header line; `contradicts` is True when a
    source would have supported it but restates it with the opposite polarity
    (`Grounder.restates_with_opposite_polarity`)."""

    sentence: Sentence
    source: int | None
    lexical: float
    cosine: float | None
    claim: bool
    echo: bool = False
    contradicts: bool = False

    @property
    def kept(self) -> bool:
        return not self.echo and (self.source is not None or not self.claim)


class Grounder:
    """Attributes sentences to the sources an answer was generated from.

    Args:
        sources: the numbered sources of the prompt, in prompt order (source `n` is `sources[n - 1]`).
        embed_queries / embed_passages: the retriever's embedder (`Embedder.embed_queries`,
            `embed_passages`: texts -> L2-normalised rows); None = lexical support only.
        embedder_name: selects the cosine threshold (`MIN_COSINE`): "e5" models have compressed cosines.
        translate: dictionary translation of a text into the other language (the retriever's
            `crosslingual.translate`): a Chinese sentence about an English source (or the reverse) is
            then scored by the share of its words found in the source in either language
            (`Translation.coverage`); None = such a sentence can only be supported by an embedding.
        question: the reader's question; an answer sentence that only restates it ("Yes, you should use
            public WiFi when travelling" for "Should I use public WiFi when travelling?") must agree
            in polarity with the source statement closest to it (`opposes_the_source`). "": not checked.
        topic: the words the answer must share at least one of (`off_the_question`): the standalone
            retrieval query of a follow-up ("and for contractors?" with its earlier question) and the
            question's English translation; default `question`.
    """

    def __init__(
        self,
        sources: Sequence[RetrievedChunk],
        *,
        embed_queries: Callable[[Sequence[str]], np.ndarray] | None = None,
        embed_passages: Callable[[Sequence[str]], np.ndarray] | None = None,
        embedder_name: str = "",
        translate: Callable[[str], object] | None = None,
        question: str = "",
        topic: str = "",
    ):
        self.sources = list(sources)
        self._question_terms = content_terms(question) if question else set()
        self._yes_no = bool(question) and is_yes_no_question(question)
        self._topic_terms = {
            t for t in sparse.terms(topic or question)
            if t not in QUESTION_WORDS_ZH and not (len(t) == 1 and cjk_share(t))
        }
        self.translate = translate
        self._texts = [support_text(c) for c in self.sources]
        self._chinese = [cjk_share(t[:2000]) >= MIN_CJK_SHARE_ZH for t in self._texts]
        self._terms = [content_terms(f"{c.title} {c.heading} {t}") for c, t in zip(self.sources, self._texts)]
        self._numbers = [numbers_in(f"{c.title} {c.heading} {t}") for c, t in zip(self.sources, self._texts)]
        self._unit_texts = [f"{c.title} {c.heading} {t}" for c, t in zip(self.sources, self._texts)]
        self._table_numbers = [numbers_in("\n".join(re.findall(r"(?m)^\s*\|.*$", t))) for t in self._texts]
        self._embed_queries = embed_queries if embed_passages is not None else None
        self._embed_passages = embed_passages
        self._passage_vectors: np.ndarray | None = None
        self._shown_vectors: dict[int, np.ndarray] = {}
        family = "e5" if "e5" in embedder_name.lower() else "default"
        self.min_cosine, self.min_cosine_across = MIN_COSINE[family], MIN_COSINE_ACROSS[family]
        statements = [source_statements(t, split_sentences) for t in self._texts]
        self._statements = [[(content_terms(text), negated) for text, negated in page] for page in statements]
        self._statement_texts = [[text for text, _ in page] for page in statements]
        self._answer_lists = ListPolarity()
        self._echo_terms = [t for t in (content_terms(s) for s in re.split(r"(?<=[.:])\s+|\n", SYSTEM_PROMPT)) if t]

    def lexical(self, terms: set[str], n: int) -> float:
        """Share of `terms` found in source `n` (1-based), in [0, 1]."""
        return len(terms & self._terms[n - 1]) / len(terms) if terms else 0.0

    def _cosines(self, text: str) -> np.ndarray | None:
        """Cosine of `text` to each source: to its support text, or, for a source the prompt showed as
        a focused passage, to that passage when higher. The floors (`MIN_COSINE`, `MIN_COSINE_ACROSS`)
        were fitted on passages of a few sentences; a whole chunk on several topics embeds further from
        a sentence about one of them (a right Chinese answer about a handbook chunk: 0.812 to the
        976-character chunk)."""
        if self._embed_queries is None or not self.sources:
            return None
        if self._passage_vectors is None:
            shown = [without_instructions(c.text) for c in self.sources if c.full_text]
            vectors = np.asarray(self._embed_passages(self._texts + shown))
            self._passage_vectors = vectors[: len(self._texts)]
            self._shown_vectors = {
                i: vectors[len(self._texts) + k] for k, i in enumerate(i for i, c in enumerate(self.sources) if c.full_text)
            }
        vector = np.asarray(self._embed_queries([text]))[0]
        cosines = self._passage_vectors @ vector
        for i, shown_vector in self._shown_vectors.items():
            cosines[i] = max(cosines[i], float(shown_vector @ vector))
        return cosines

    def restates_with_opposite_polarity(self, n: int, terms: set[str], negated: bool) -> bool:
        """True when the sentence of source `n` (1-based) that holds most of an answer sentence's
        `terms` (at least 2 of them and `MIN_RESTATEMENT` of all) has the other polarity (`negated` is
        the answer sentence's): "Yes, you can use the browser's password autofill" against "Use the
        browser based auto-fill, …" under "Do not:" (fresh-user trial)."""
        best, polarity = (0.0, 0.0), negated
        for source_terms, source_negated in self._statements[n - 1]:
            common = len(terms & source_terms)
            if common >= 2 and source_terms:
                score = (common / len(terms), common / len(source_terms))
                if score > best:
                    best, polarity = score, source_negated
        return best[0] >= MIN_RESTATEMENT and polarity != negated

    def off_the_question(self, verdicts: Sequence[Verdict]) -> bool:
        """True when the answer's supported claims (`verdicts` of its sentences) share no index term
        (`sparse.terms`: stemmed English words, jieba's Chinese words) with the question (`topic`): they are
        supported by the sources, and about something else. "How do I apply for a company car?", which
        no page answers, was answered with two sentences of the hiring page ("We carefully consider every
        application, …"): supported, irrelevant, cited. An answer without supported claims, or a
        grounder without a question, is never off the question, nor is one of fewer than `MIN_TOPIC_TERMS`
        terms (a bare value).

        Query-term overlap is the crudest answer-relevance signal (the embedding one, the question's
        cosine to the answer, did not separate this case: 0.853-0.854 for the irrelevant answers,
        0.855 and up for the right ones, docs/benchmarks.md); it only catches an answer that shares
        nothing with its question."""
        if not self._topic_terms:
            return False
        terms = set().union(*(sparse.terms(v.sentence.text) for v in verdicts if v.claim and not v.echo and v.source is not None))
        # Numbers are values, not topic: "+1 (650) 273-5591 [1]" (5 index terms, all numbers) answered
        # a question about a phone number and was withdrawn (fresh-user trial).
        words = {t for t in terms if not _VALUE.fullmatch(t)}
        return len(words) >= MIN_TOPIC_TERMS and not self._topic_terms & terms

    def restates_the_question(self, terms: set[str]) -> bool:
        """True when an answer sentence's content `terms` are the question's, but for at most one that is
        no number: a yes or no in the question's words, whose only information is its polarity. A number
        added is the answer to a "how many" ("背景调查会追溯7年的犯罪记录。" for "背景调查会追溯多少年的犯罪记录？"),
        whose source sentence may well be negated ("no inquiry regarding any criminal offense that is
        more than seven (7) years old"): it was declined as the opposite of its source (fresh-user trial).
        Only the answer to a yes/no question is one: asked which value something has, "The default value of
        TiDB's `time_zone` variable is `SYSTEM`." adds one word to the question's and is its answer, and was
        removed as the opposite of its page (`is_yes_no_question`)."""
        added = terms - self._question_terms
        return (
            self._yes_no and len(terms & self._question_terms) >= 2 and len(added) <= 1
            and not any(_NUMBER.fullmatch(t) for t in added)
        )

    def says_it(self, n: int, terms: set[str], translation=None) -> bool:
        """True when one statement of source `n` (1-based) holds `MIN_STATED` of a sentence's content
        `terms`, or, across languages, `MIN_CROSS_LINGUAL` of its words through their dictionary
        `translation` (`Translation.coverage`). For a sentence that restates the question
        (`restates_the_question`): "Yes, the company gives employees a company car [1]." was kept and
        cited at lexical support 0.50 and cosine 0.825 against a travel page whose rental-car paragraph
        holds "company", "employee" and "car" in different sentences, no company car anywhere (fresh-user
        trials of the fifth and sixth sessions)."""
        if translation is not None:
            return any(translation.coverage(text) >= MIN_CROSS_LINGUAL for text in self._statement_texts[n - 1])
        return bool(terms) and any(
            len(terms & statement) / len(terms) >= MIN_STATED for statement, _ in self._statements[n - 1]
        )

    def opposes_the_source(self, n: int, text: str, terms: set[str], negated: bool, translation=None) -> bool:
        """True when the statements of source `n` (1-based) that share the most of an answer sentence's
        (`text`) content `terms` (at least 2, weighed by rarity), or, across languages, the most of its
        words through its dictionary `translation` and of its Latin-script names (at least 2), all have
        the other polarity than `negated`.

        For a sentence that restates the question (`restates_the_question`), where the restatement
        test of `restates_with_opposite_polarity` is too strict: the answer adds the question's words
        ("when travelling with your work laptop") that the source statement does not repeat. Fresh-user
        trial: "Yes, you should use public WiFi when travelling with your work laptop [1]." against
        "Avoid public WiFi networks, and use a VPN if you must connect to one."; "需要把密码发给IT验证[2]。"
        against "IT will never ask you for your password."
        """
        statements = self._statements[n - 1]
        if translation is not None:
            # The sentence's words found through the dictionary, and its Latin-script names ("IT") as
            # written, in each statement; at least two of them.
            groups = sum(1 for g in translation.groups if g.source or g.translations)
            names = {w.lower() for w in _LATIN_WORD.findall(text)}
            scores = [
                round(translation.coverage(statement) * groups) + len(names & {w.lower() for w in _LATIN_WORD.findall(statement)})
                for statement in self._statement_texts[n - 1]
            ]
            near = [score >= 2 for score in scores]
        else:
            # Shared terms weighed by their rarity among the page's statements: "wifi" says more about
            # which statement is meant than "use" or "laptop" ("use a privacy screen filter on your laptop
            # screen in public" shares as many terms as the WiFi rule).
            frequency: dict[str, int] = {}
            for source_terms, _ in statements:
                for term in source_terms & terms:
                    frequency[term] = frequency.get(term, 0) + 1
            scores = [sum(1 / frequency[t] for t in terms & source_terms) for source_terms, _ in statements]
            near = [len(terms & source_terms) >= 2 for source_terms, _ in statements]
        candidates = [score for score, ok in zip(scores, near) if ok]
        if not candidates:
            return False
        best = max(candidates)
        return all(statements[i][1] != negated for i, score in enumerate(scores) if near[i] and score == best)

    def judge(self, sentence: Sentence, *, as_claim: bool = False) -> Verdict:
        """The verdict on one sentence (embeds it when an embedder was given and lexical support alone
        does not decide). Sentences of one answer are judged in order: a list item takes the polarity
        of its lead-in ("Do not:"). `as_claim`: judge a short sentence with any content term as a
        claim (`judged_as_claims`). An amount that a Chinese sentence writes in yuan and its English
        sources in dollars or euros is first rewritten in their currency (`currency_as_in_sources`);
        the verdict holds the sentence as rewritten."""
        english = [t for t, zh in zip(self._unit_texts, self._chinese) if not zh]
        if english and cjk_share(sentence.text) >= MIN_CJK_SHARE_ZH:
            text = currency_as_in_sources(sentence.text, english)
            sentence = replace(sentence, text=text) if text != sentence.text else sentence
        terms = content_terms(sentence.text)
        negated = self._answer_lists.polarity(sentence.text)
        # One shared term is no echo: "1. [" (an answer cut at its third token) shares only the "1" of
        # the system prompt's first rule.
        echo = len(terms) >= 2 and any(len(terms & e) / len(terms) >= MIN_ECHO_OVERLAP for e in self._echo_terms)
        # A copy of a source's header line ("handbook/…/travel/index.md — General guidance …"): the
        # prompt's label of a source, not a fact from it (fresh-user trial: "公司食堂几点开门？" got the
        # header of a travel page twice, cited).
        # Compared without case: the model capitalises a path that opens a list item ("1. Sourcegraph-handbook/…").
        echo = echo or any(c.source and c.source.lower() in sentence.text.lower() for c in self.sources)
        echo = echo or is_question(sentence.text)  # a question asked back (or the reader's repeated)
        # A pointer at a source and nothing else ("This is detailed in."), a fragment without its marker.
        echo = echo or (len(terms) < MIN_CLAIM_TERMS and is_dangling(sentence.text))
        echo = echo or is_hollow(sentence)  # "The minimum TLS version is [1]."
        claim = (
            len(terms) >= MIN_CLAIM_TERMS or bool(numbers_in(sentence.text)) or (as_claim and bool(terms))
        ) and not is_lead_in(sentence.text)
        if not self.sources:
            return Verdict(sentence, None, 0.0, None, claim, echo)
        lexical = [self.lexical(terms, n) for n in range(1, len(self.sources) + 1)]
        # Across languages (a Chinese sentence, an English source) the words are compared through the
        # dictionary translation; that alone attributes too loosely (see MIN_CROSS_LINGUAL), so such a
        # source supports the sentence only when the embeddings agree as well.
        chinese = cjk_share(sentence.text) >= MIN_CJK_SHARE_ZH
        across = [zh != chinese for zh in self._chinese]
        coverage = [0.0] * len(self.sources)  # of the sentence's words, through the translation
        numbers = numbers_in(sentence.text)
        # A Chinese page states many figures in a table of English labels ("| Database | 64 |" under
        # "标识符长度限制"): a Chinese sentence about it shares few bigrams with it ("数据库名和表名最长可以有 64
        # 个字符", lexical 0.19), so its words are looked for through the dictionary there too, when the
        # page's table rows state every number the sentence does.
        tabled = [
            chinese and not across[i] and bool(numbers) and numbers <= self._table_numbers[i]
            for i in range(len(self.sources))
        ]
        translation = None
        if self.translate is not None and (any(across) or any(tabled)):
            translation = self.translate(sentence.text)
            if translation:
                coverage = [
                    translation.coverage(t) if across[i] or tabled[i] else 0.0 for i, t in enumerate(self._texts)
                ]
        states_only_known = [numbers <= self._numbers[i] for i in range(len(self.sources))]
        # Names, commands and other Latin-script words keep their form in a Chinese sentence (numbers
        # have their own rule above: "9点" is "9am" in the page, whose term is "9am"): across
        # languages, a source supports the sentence only when it holds every one of them.
        names = {t for t in terms if not _CJK_RUN.search(t) and not _NUMBER.fullmatch(t)} if chinese else set()
        # And a number written with a unit keeps it ("每 15 天" is not the page's "15 characters").
        states_only_known = [
            known and (not across[i] or (names <= self._terms[i] and (not chinese or units_agree(sentence.text, self._unit_texts[i]))))
            # Within English, a span of time keeps its unit too ("every 3 months" is not the page's "3yrs").
            and (chinese or self._chinese[i] or english_time_units_agree(sentence.text, self._unit_texts[i]))
            for i, known in enumerate(states_only_known)
        ]
        alone = [lexical[i] >= MIN_LEXICAL for i in range(len(self.sources))]
        # Lexical support needed before the embedding may decide.
        # A name the sentence adds to the question's words and the source holds ("#ask-it-tech-ops") is
        # evidence as a number is: "…需要通过 #ask-it-tech-ops 频道提交请求。" (coverage 0.47) was right and removed.
        added_names = names - self._question_terms
        near = [
            lexical[i] >= MIN_LEXICAL_WITH_EMBEDDING
            or coverage[i] >= (
                MIN_CROSS_LINGUAL_WITH_NUMBERS
                if (numbers and numbers <= self._numbers[i]) or (added_names and added_names <= self._terms[i])
                else MIN_CROSS_LINGUAL
            )
            for i in range(len(self.sources))
        ]
        cosines = None
        if not any(a and k for a, k in zip(alone, states_only_known)) and any(near):
            cosines = self._cosines(sentence.text)

        def supports(i: int) -> bool:
            if not states_only_known[i]:
                return False
            if alone[i]:
                return True
            # The embedding decides only for the source the sentence is closest to among the sources in
            # that source's language (sentence-level cosines are compressed, see MIN_COSINE, and run
            # 0.05-0.08 higher within one language: a Chinese sentence is always closer to a Chinese
            # source than to the English one it restates), above an absolute floor.
            floor = self.min_cosine_across if across[i] else self.min_cosine
            if cosines is None or not near[i] or cosines[i] < floor:
                return False
            # Within one language, among the sources that share enough words with it: two chunks of one
            # page, the closer one sharing too few ("PD Recover 是对 PD 进行灾难性恢复的工具", 0.43), left the
            # other unable to support "可以使用 PD Recover 工具进行恢复" (lexical 0.52, cosine 0.929 against
            # 0.945). Across languages, where the dictionary's coverage is loose, among all of them: so
            # restricted there, bench/calibrate_crosslingual.py kept one more faithful sentence and one
            # more invented one ("出差前要把所有数据备份到个人硬盘").
            return i == max(
                (j for j in range(len(self.sources)) if across[j] == across[i] and (near[j] or across[j])),
                key=lambda j: cosines[j],
            )

        def strength(i: int) -> float:
            return max(lexical[i], coverage[i]) + (float(cosines[i]) if cosines is not None else 0.0)

        # A sentence that states nothing checkable gets no marker: no source is vouching for it.
        supporting = [i for i in range(len(self.sources)) if claim and supports(i)]
        # Same words, opposite meaning ("Use a password that is the same …" under the page's "Do not:").
        opposite = [i for i in supporting if not across[i] and self.restates_with_opposite_polarity(i + 1, terms, negated)]
        if self.restates_the_question(terms):  # a yes or no in the question's words: its polarity is its claim
            # Its words are the question's, which retrieval found in the source anyway: it is supported
            # only by a statement that says it (`says_it`), not by those words spread over the chunk.
            supporting = [i for i in supporting if self.says_it(i + 1, terms, translation if across[i] else None)]
            opposite += [
                i for i in supporting if i not in opposite
                and self.opposes_the_source(i + 1, sentence.text, terms, negated, translation if across[i] else None)
            ]
        supporting = [i for i in supporting if i not in opposite]
        own = [n - 1 for n in sentence.markers if 1 <= n <= len(self.sources) and (n - 1) in supporting]
        best = own[0] if own else (max(supporting, key=strength) if supporting else None)
        top = best if best is not None else max(range(len(self.sources)), key=strength)
        return Verdict(
            sentence, None if best is None else best + 1, lexical[top],
            None if cosines is None else float(cosines[top]), claim, echo, bool(opposite) and best is None,
        )


def with_marker(text: str, n: int | None) -> str:
    """`text` with the marker `[n]` before its terminal punctuation (`... 15 characters [1].`)."""
    if n is None:
        return text
    m = re.search(r"[.!?。！？；:：]+$", text)
    if m:
        return f"{text[: m.start()]} [{n}]{text[m.start():]}" if not _CJK_RUN.search(text[-2:]) else (
            f"{text[: m.start()]}[{n}]{text[m.start():]}"
        )
    return f"{text} [{n}]" if not _CJK_RUN.search(text[-1:]) else f"{text}[{n}]"


def join_sep(dropped: list[str]) -> str:
    """The separator to put where sentences were dropped: the widest one among them (a paragraph break
    survives the removal of the sentence it followed)."""
    return max(dropped, key=lambda s: (s.count("\n"), len(s)), default=" ")


@dataclass
class Grounded:
    """A grounded answer: `text` with a marker after each supported sentence; `declined` when too little
    was supported (then `text` is `NO_ANSWER`); the verdicts of all sentences, in order."""

    text: str
    declined: bool
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def supported_share(self) -> float:
        """Share of the claim characters in supported sentences, in [0, 1] (0.0 without claims)."""
        return supported_share(self.verdicts)

    @property
    def cited(self) -> list[int]:
        """Source numbers the text cites, in order of first appearance."""
        return list(dict.fromkeys(v.source for v in self.verdicts if v.kept and v.source is not None))


def supported_share(verdicts: Sequence[Verdict]) -> float:
    """Share of the claim characters (sentences that state a checkable fact, echoes excluded) that are
    supported, in [0, 1]; 0.0 when there is no claim."""
    claims = [v for v in verdicts if v.claim and not v.echo]
    total = sum(len(v.sentence.text) for v in claims)
    if not total:
        return 0.0
    return sum(len(v.sentence.text) for v in claims if v.source is not None) / total


def is_enumerator(text: str) -> bool:
    """True for a sentence that is only a list number ("1.", "2)", "3、"): kept to lay a list out, never
    an answer on its own (fresh-user trial: "1." alone was judged as a short answer and cited, "1 [1].")."""
    return bool(_ENUMERATOR.fullmatch(text))


def is_fence(text: str) -> bool:
    """True for a line that opens or closes a fenced code block (three backticks)."""
    return text.lstrip().startswith("```")


class Renderer:
    """Joins kept sentences as they come: each with its marker (none inside a fenced code block, where
    it would break the command: the block's lines are still checked, and removed when unsupported),
    separated by the separators of the sentences dropped before it (see `join_sep`).

    A lead-in (`is_lead_in`) or a bare list number (`is_enumerator`: "1." streamed, then the answer
    withdrawn, in the fresh-user trial) is held back, with the unsupported sentences kept after it
    (fences, short list labels), until a supported sentence follows; an answer that ends before one
    never shows it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._seps: list[str] = []
        self._fenced = False
        self._held: list[Verdict] = []

    def add(self, verdict: Verdict) -> str:
        """The text to append for `verdict` ("" when the sentence is dropped or held back)."""
        text = verdict.sentence.text
        if self._held or (verdict.kept and (is_lead_in(text) or is_enumerator(text.strip()))):
            self._held.append(verdict)
            if not (verdict.kept and verdict.source is not None):
                return ""
            held, self._held = self._held, []
            return "".join(self._emit(v) for v in held)
        return self._emit(verdict)

    def release(self) -> str:
        """The text held back behind a lead-in, for an answer that was cut at its token limit (its
        lead-in then says what the reader would have got; "" when nothing is held)."""
        held, self._held = self._held, []
        return "".join(self._emit(v) for v in held)

    def _emit(self, verdict: Verdict) -> str:
        fence = is_fence(verdict.sentence.text)
        if not verdict.kept and not fence:
            self._seps.append(verdict.sentence.sep)
            return ""
        marker = None if (self._fenced or fence) else verdict.source
        if fence:
            self._fenced = not self._fenced
        text = with_marker(verdict.sentence.text, marker)
        if self.parts:
            text = join_sep(self._seps) + text
        self._seps = [verdict.sentence.sep]
        self.parts.append(text)
        return text


def render(verdicts: Sequence[Verdict]) -> str:
    """The kept sentences with their markers, joined by their separators (`Renderer`)."""
    renderer = Renderer()
    for v in verdicts:
        renderer.add(v)
    return "".join(renderer.parts).strip()


def judged_as_claims(verdicts: Sequence[Verdict], grounder: Grounder) -> list[Verdict] | None:
    """For an answer that states no claim (every sentence too short: "SG-Staff", "不可以。"), its kept
    sentences judged again as claims (`Grounder.judge(as_claim=True)`), so that a short answer is cited
    or, unsupported, declined like any other; None when the answer has a claim or nothing to judge."""
    def judged(v: Verdict) -> bool:  # a fence line ("```sql") or a list number alone is no short answer
        text = v.sentence.text
        return v.kept and bool(content_terms(text)) and not is_enumerator(text) and not is_fence(text)

    if any(v.claim and not v.echo for v in verdicts) or not any(judged(v) for v in verdicts):
        return None
    return [grounder.judge(v.sentence, as_claim=True) if judged(v) else v for v in verdicts]


def ground(answer: str, grounder: Grounder, *, lang: str = "en", cut: bool = False) -> Grounded:
    """Ground a whole answer: unknown markers dropped, unsupported sentences removed, a short answer
    judged as a claim (`judged_as_claims`, unless it was `cut` at its token limit), declined (with
    `NO_ANSWER[lang]`) when `declines`."""
    answer = drop_unknown_markers(answer, len(grounder.sources))
    verdicts = [grounder.judge(s) for s in split_sentences(answer)]
    if not cut:
        verdicts = judged_as_claims(verdicts, grounder) or verdicts
    text = render(verdicts)
    if declines(verdicts, text, cut=cut) or grounder.off_the_question(verdicts):
        return Grounded(NO_ANSWER[lang], True, verdicts)
    return Grounded(text, False, verdicts)


def declines(verdicts: Sequence[Verdict], text: str, *, cut: bool = False) -> bool:
    """True when an answer whose sentences got `verdicts` and whose grounded `text` is this must be
    declined: it states facts and less than `MIN_SUPPORTED_SHARE` of them is supported, or nothing is
    left (an empty answer, or only echoes and code fences). An answer `cut` before its first fact (a
    few tokens at `max_tokens`) is kept as it is: nothing in it is unsupported. Code fences, bare list
    numbers and words without content ("No.", which the model wrote alone to "Am I allowed to bring my dog
    to the office?": neither citable nor checkable) alone are nothing."""
    if any(v.claim and not v.echo for v in verdicts):
        return supported_share(verdicts) < MIN_SUPPORTED_SHARE
    rest = "\n".join(line for line in text.splitlines() if not is_fence(line) and not is_enumerator(line.strip()))
    return not (rest.strip() if cut else content_terms(rest))
