"""Grounded answers: every sentence kept is one its cited source supports, as a model judged it.

A small chat model rarely writes `[n]` markers, sometimes writes markers that name no source, and
invents facts when its sources hold none. So:

1. The answer is split into sentences (English `.!?` followed by white space, Chinese `。！？；`, and
   line breaks, so that each list item is one sentence); a marker written after a sentence's end
   belongs to that sentence; markers that name no source are dropped.
2. Each sentence that states something (a claim) is attributed to one source: the one its marker
   names, else the one sharing most of its words (through the dictionary translation across
   languages). Its evidence is the window of that source's sentences that shares most of its words.
3. Rules the judge cannot apply: every number and every name (an identifier, a command, an acronym;
   every Latin-script word of a Chinese sentence) must be written in the source as in the sentence,
   and every number in the evidence window itself: a wrong claim built of numbers found elsewhere on
   the page ("16 indexes" from another row of a limits table) never reaches the judge.
4. A near-verbatim sentence (`FAST_PATH_SHARE` of its terms in the window, same polarity) is supported
   without a model call, one sharing less than `MIN_JUDGED_SHARE` with a window in its own language is
   not; the others go to the evidence judge (`judge.EvidenceJudge`: one batched
   prompt per answer, the served chat model says YES or NO per sentence/passage pair).
5. Unsupported sentences are removed (a list item's bullet moves to what is left of its line). When less than `MIN_SUPPORTED_SHARE` of the claims is supported, or the supported
   ones share no word with the question, the answer is replaced: by a quote of the source sentence that
   the judge says answers the question, looked for first where the rejected claims point
   (`Grounder.judged_quote`), else by "not found". What is left is valid Markdown (`markdown.tidy`).
"""

from __future__ import annotations

import asyncio
import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from assistant.answering.injection import without_instructions
from assistant.answering.judge import EvidenceJudge, Pair
from assistant.answering.language_check import MIN_CJK_SHARE_ZH
from assistant.answering.markdown import tidy
from assistant.answering.polarity import is_list_item, is_negated, is_negating_heading
from assistant.answering.prompt import NO_ANSWER, SYSTEM_PROMPT
from assistant.core.index import sparse
from assistant.core.language import QUESTION_WORDS_ZH, cjk_share
from assistant.retrieval import RetrievedChunk

# A sentence with at least this share of its content terms in its evidence window (and the window's
# polarity) is a copy: supported without asking the judge. Copies of the page's own sentences share all
# of them; at 0.6 (the lexical threshold of the rules this replaces) 10% of sentences of other pages of
# the same folder passed (bench/calibrate_grounding.py), so the fast path takes only near-copies.
FAST_PATH_SHARE = 0.85
# A claim with less than this share of its terms in its evidence window (in the window's language) is
# not asked about: in one batched prompt Qwen2.5-Coder-1.5B said YES to invented printer steps ("Click on
# "Add Printer"", shares 0.0-0.33) against a page about returning laptops, where every supported paraphrase
# of the development captures shared at least 0.50 and a hand-written one ("You should not let the browser
# fill in your passwords automatically") 0.40: a third of its words (bench/ground_answers.py,
# docs/notes/answer-grounding-investigations.md, "Answers on the held-aside split").
MIN_JUDGED_SHARE = 1 / 3
# Without a judge (finetune's dataset filter, `ground`), a sentence is supported when this share of its
# terms is in one source: 100% of copied and 94-99% of reworded sentences, 10% of unrelated ones.
MIN_LEXICAL = 0.6
# Characters of source text shown to the judge per pair: about 120 tokens, so that a batch of 8 pairs
# stays near 1,000 prompt tokens (15-35 ms a token on 2 cores).
EVIDENCE_CHARS = 240
# A sentence with fewer content terms than this carries no claim to check ("Yes.", "Steps:"): it is
# kept when the answer around it is, and does not count towards the supported share.
MIN_CLAIM_TERMS = 3
# Decline (or quote) when less than half of the answer's claims (by characters) is supported: a mostly
# invented answer with one supported sentence would still mislead.
MIN_SUPPORTED_SHARE = 0.5
# A supported answer with fewer index terms than this is never judged off the question: a bare value
# ("5分钟", "Airbase", "$50") answers a question without repeating its words.
MIN_TOPIC_TERMS = 5
# A sentence that shares this much of its terms with one sentence of the system prompt is an echo.
MIN_ECHO_OVERLAP = 0.6
# A quote is a source sentence that a rejected claim restates, or one of the best windows of this many
# sources holding this share of the question's terms, that the judge says answers the question
# (`Grounder.judged_quote`): everyday paraphrases share few words with the page that answers them
# ("married" / "marriage certificate"). Without a judge there is no quote: a window holding 60% of the
# question's words, quoted unasked, answered unanswerable Chinese questions (held-aside captures).
MIN_JUDGED_QUOTE_SHARE = 0.2
JUDGED_QUOTES = 2
QUOTE_CHARS = 280
# Distinct sources whose analysis (`_source_page`: sentences, terms) is kept between answers; ~20-60 KB each.
SOURCE_PAGE_CACHE = 512
QUOTE_LEAD = {"en": "The closest passage in your documents says:", "zh": "文档中最相关的段落写道："}

_MARKER = re.compile(r"\s*\[(\d+(?:\s*[,，]\s*\d+)*)\]")
_SPACED_MARKER = re.compile(r"([ \t]*)\[(\d+(?:\s*[,，]\s*\d+)*)\]")
_ANY_MARKER = re.compile(r"\[(\d+(?:\s*[,，]\s*\d+)*)\]")
# The placeholder of the prompt's reminder ("with [n] after each sentence"), copied as it is.
_PLACEHOLDER_MARKER = re.compile(r"[ \t]*\[n\]")
# A source cited by its file name in brackets ("[Yubikey-faq.md]"): names no numbered source.
_FILE_CITATION = re.compile(
    r"[ \t]*\[[^\[\]\n]{0,200}\.(?:md|mdx|markdown|txt|rst|html?|pdf|docx?|xlsx?|pptx?|csv|eml|msg|json|ya?ml)\]",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9_\-.]*[a-z0-9]|[a-z0-9]", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_LATIN_WORD = re.compile(r"[A-Za-z0-9#@$][A-Za-z0-9_+\-./#@]*[A-Za-z0-9]")
# A name an English sentence must copy: an acronym or mixed-case word (TiDB, SSO, 1Password), or an
# identifier (tidb_mem_quota_query, #ask-it-tech-ops, example.com/path).
_NAME_EN = re.compile(r"^(?:[A-Z0-9]{2,}s?|[a-z0-9]+[A-Z]\w*|[A-Z]\w*[A-Z]\w*|.*[_#@/].*|.*\w\.\w.*|.*\d.*[A-Za-z].*)$")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
# Sentence ends: English terminal punctuation before white space, Chinese terminal punctuation, lines.
SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])\s*|\s*\n\s*")
_NOT_AN_END = re.compile(r"(?:^\s*(?:[-*]\s*)?(?:\d{1,2}|[a-zA-Z])\.|\b(?:e\.g|i\.e|etc|vs|cf|approx|Mr|Ms|Dr|No)\.)$")
_LEAD_IN = re.compile(r"[:：]\s*$")
_QUESTION = re.compile(r"[?？][\s)）\]】\"”'’]*$")
_ENUMERATOR = re.compile(r"^\s*(?:[-*]\s*)?\d{1,2}[.)、](?!\d)\s*")  # "2." of a list, not of "2.5 years"
_LIST_PREFIX = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)、])\s+")
# Stemmed English question words (`sparse.terms`): "How many …" asks, "many" is no topic.
_QUESTION_WORDS_EN = frozenset({"mani", "much", "often", "whose"})
_VALUE = re.compile(r"[\d.,/:+()-]+")
_STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being
    it its this that these those there here you your we our they their he she his her i me my do does did
    not no yes can could should would will may might must shall have has had about into over than so such
    also just only any all each more most other some very what which who whom when where why how""".split()
)


def content_terms(text: str) -> set[str]:
    """The terms that carry a sentence's meaning: lower-cased English words and numbers without stop
    words (a plural's "s" off), and the character bigrams of each Chinese run (a single ideograph when
    the run has one), after NFKC normalisation (full-width `５０００` is `5000`)."""
    text = _ANY_MARKER.sub(" ", unicodedata.normalize("NFKC", text))
    terms = {w.lower().rstrip(".") for w in _WORD.findall(text)}
    terms |= {t.replace("-", "") for t in terms if "-" in t}  # "auto-fill" is also "autofill"
    terms = {t[:-1] if len(t) > 3 and t.endswith("s") else t for t in terms if t not in _STOPWORDS}
    for run in _CJK_RUN.findall(text):
        terms.update([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
    return terms


def support_text(source: RetrievedChunk) -> str:
    """The text a source's support is counted on: the whole chunk (`full_text`) when the prompt held a
    focused passage of it, else its `text`, without text planted for the assistant
    (`injection.without_instructions`, as in the prompt)."""
    return without_instructions(source.full_text or source.text)


def is_lead_in(text: str) -> bool:
    """True for a sentence that ends in a colon (markers aside): it announces what follows, states
    nothing by itself, and is shown only before a supported sentence."""
    return bool(_LEAD_IN.search(_ANY_MARKER.sub("", text)))


def is_question(text: str) -> bool:
    """True for a sentence that ends in a question mark: an answer that asks states nothing."""
    return bool(_QUESTION.search(_ANY_MARKER.sub("", text)))


def is_enumerator(text: str) -> bool:
    """True for a sentence that is only a list number ("1.", "2)", "3、")."""
    return bool(_ENUMERATOR.fullmatch(text))


def is_fence(text: str) -> bool:
    """True for a line that opens or closes a fenced code block (three backticks)."""
    return text.lstrip().startswith("```")


def numbers_in(text: str) -> set[str]:
    """The numbers a text states (`15`, `1400` for `1,400`, `3.5`: a decimal point kept, so that "7.5"
    is not "75"); markers and a list item's number (`2. Turn on ...`) excluded; full-width digits read
    as ASCII (NFKC)."""
    text = _ENUMERATOR.sub("", _ANY_MARKER.sub(" ", unicodedata.normalize("NFKC", text)))
    return {re.sub(r",(?=\d{3}\b)", "", n) for n in _NUMBER.findall(text)}


_SPELLED_EN = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
                                                     "ninety": "90", "hundred": "100"}
_SPELLED_EN_WORD = re.compile(r"\b(" + "|".join(_SPELLED_EN) + r")\b", re.IGNORECASE)
_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
_SPELLED_ZH = re.compile(r"[一二三四五六七八九两]?十[一二三四五六七八九]?|[零一二三四五六七八九两]")


def _zh_number(text: str) -> str:
    """`十五` -> "15", `二十` -> "20", `两` -> "2" (numbers below 100 written in Chinese numerals)."""
    if "十" not in text:
        return str(_ZH_DIGITS[text])
    tens, _, units = text.partition("十")
    return str(_ZH_DIGITS.get(tens, 1) * 10 + (_ZH_DIGITS[units] if units else 0))


def page_numbers(text: str) -> set[str]:
    """The numbers a source states (`numbers_in`) and those it spells out below 100 ("five minutes",
    "十分钟", "两周"), so that a claim's "5 minutes" is found on a page that writes "five minutes". Only
    a source's words are read so: in a claim, "one of the managers" is no number to check."""
    spelled = {_SPELLED_EN[w.lower()] for w in _SPELLED_EN_WORD.findall(text)}
    spelled |= {_zh_number(w) for w in _SPELLED_ZH.findall(text)}
    return numbers_in(text) | spelled


def names_in(text: str) -> set[str]:
    """The names a sentence must copy from its source, lower-cased: in a Chinese sentence every
    Latin-script word (names and commands keep their form in Chinese text), in an English one the
    acronyms, mixed-case words and identifiers (`_NAME_EN`); numbers alone are `numbers_in`'s."""
    text = _ANY_MARKER.sub(" ", unicodedata.normalize("NFKC", text))
    words = [w.rstrip(".") for w in _LATIN_WORD.findall(text)]
    if cjk_share(text) < MIN_CJK_SHARE_ZH:
        words = [w for w in words if _NAME_EN.match(w)]
    return {w.lower() for w in words if not _NUMBER.fullmatch(w) and re.search(r"[A-Za-z]", w)}


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
    """`answer` without the marker numbers that name no source (1..`n_sources`); a marker left empty is
    removed with the space before it, and so are a file name in brackets and the placeholder "[n]"."""

    def keep(m: re.Match) -> str:
        numbers = [n for n in re.findall(r"\d+", m.group(2)) if 1 <= int(n) <= n_sources]
        return f"{m.group(1)}[{', '.join(numbers)}]" if numbers else ""

    return _SPACED_MARKER.sub(keep, _PLACEHOLDER_MARKER.sub("", _FILE_CITATION.sub("", answer)))


@dataclass
class Verdict:
    """How one sentence fared: `source` is the 1-based number of the source that supports it (None when
    none does); `claim` is False for a sentence too short to state a checkable fact; `echo` is True for
    a copy of the system prompt, of a source's header line, or a question; `lexical` the share of its
    terms in its evidence window; `passage` that window; `by` what decided: "copy" (fast path),
    "judge", "lexical" (no judge), "numbers" / "names" (a value not in any source or not in the
    window), "overlap" (too few of its words in the window to ask), "" (no claim)."""

    sentence: Sentence
    source: int | None
    lexical: float
    claim: bool
    echo: bool = False
    passage: str = ""
    by: str = ""
    candidate: int | None = None  # the source judged, supported or not

    @property
    def kept(self) -> bool:
        return not self.echo and (self.source is not None or not self.claim)


def source_sentences(text: str) -> list[str]:
    """A source's sentences in order (`split_sentences` on its text), a list item preceded by the
    negating lead-in of its list (`polarity.is_negating_heading`: "Do not: Use the browser based
    auto-fill"), so that the item keeps the meaning its list gives it, for the judge and the fast path."""
    out: list[str] = []
    lead = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        if is_list_item(line.strip()):
            prefix = f"{lead} " if lead else ""
            line = _LIST_PREFIX.sub("", line.strip()) if lead else line
        else:
            lead = line.strip().strip("*_#> ") if is_negating_heading(line) else ""
            prefix = ""
        out += [prefix + s.text for s in split_sentences(line)]
    return out


_TABLE_RULE = re.compile(r"\|?(\s*:?-{3,}:?\s*\|)+\s*(:?-{3,}:?\s*)?")


def states_nothing(page: Sequence[str], i: int) -> bool:
    """Whether sentence `i` of a source's sentences (`source_sentences`) is only a Markdown heading, a
    table's rule line or its header row (the row above a rule): a quote of such lines names the topic
    and states no fact (fresh-user trial: a heading, and a table header without its rows, quoted)."""
    line = page[i].strip()
    following = page[i + 1].strip() if i + 1 < len(page) else ""
    return line.startswith("#") or bool(_TABLE_RULE.fullmatch(line)) or (
        line.startswith("|") and bool(_TABLE_RULE.fullmatch(following))
    )


# The system prompt's sentences as terms: an answer sentence made of them echoes the rules.
_ECHO_TERMS = [t for t in (content_terms(s) for s in re.split(r"(?<=[.:])\s+|\n", SYSTEM_PROMPT)) if t]


@dataclass(frozen=True)
class _SourcePage:
    """What grounding reads of one source, a function of its text alone (`_source_page`): shared
    between the answers that cite the source, never changed."""

    chinese: bool
    lower: str  # title, heading and text, NFKC, lower-cased
    terms: frozenset[str]  # `content_terms` of the same
    numbers: frozenset[str]  # `page_numbers` of the same
    sentences: tuple[str, ...]  # `source_sentences` of the text
    sentence_terms: tuple[frozenset[str], ...]  # `content_terms` of each sentence


@functools.lru_cache(maxsize=SOURCE_PAGE_CACHE)
def _source_page(title: str, heading: str, text: str) -> _SourcePage:
    """The analysis of one source (title, heading, `support_text`), computed once per distinct source
    while it stays among the `SOURCE_PAGE_CACHE` most recent: a chat's sources are mostly the same
    few hundred chunks, and their sentences and terms cost more than the rest of a `Grounder`."""
    labelled = f"{title} {heading} {text}"
    sentences = tuple(source_sentences(text))
    return _SourcePage(
        chinese=cjk_share(text[:2000]) >= MIN_CJK_SHARE_ZH,
        lower=unicodedata.normalize("NFKC", labelled).lower(),
        terms=frozenset(content_terms(labelled)),
        numbers=frozenset(page_numbers(labelled)),
        sentences=sentences,
        sentence_terms=tuple(frozenset(content_terms(s)) for s in sentences),
    )


class Grounder:
    """Attributes the sentences of an answer to its sources and checks them.

    Args:
        sources: the numbered sources of the prompt, in prompt order (source `n` is `sources[n - 1]`).
        judge: the evidence judge (the served chat model); None = near-copies and `MIN_LEXICAL`
            overlap only (finetune's dataset filter, tests of the rules).
        translate: dictionary translation of a text into the other language (the retriever's
            `crosslingual.translate`): picks the source of a sentence in the other language than its
            sources when it names none; None = the sentence's marker, else the first such source.
        question: the reader's question.
        topic: the words the answer must share one of (`off_the_question`) and a quote must hold
            (`quote`): the question with its standalone query and English translation; default `question`.
    """

    def __init__(
        self,
        sources: Sequence[RetrievedChunk],
        *,
        judge: EvidenceJudge | None = None,
        translate: Callable[[str], object] | None = None,
        question: str = "",
        topic: str = "",
    ):
        self.sources = list(sources)
        self.judge = judge
        self.translate = translate
        self.question = question
        self.lang = "zh" if question and cjk_share(question) >= MIN_CJK_SHARE_ZH else "en"
        self._topic_terms = {
            t for t in sparse.terms(topic or question)
            if t not in QUESTION_WORDS_ZH and t not in _QUESTION_WORDS_EN and not (len(t) == 1 and cjk_share(t))
        }
        self._texts = [support_text(c) for c in self.sources]
        pages = [_source_page(c.title, c.heading, t) for c, t in zip(self.sources, self._texts)]
        self._chinese = [p.chinese for p in pages]
        self._lower = [p.lower for p in pages]
        self._terms = [p.terms for p in pages]
        self._numbers = [p.numbers for p in pages]
        self._sentences = [p.sentences for p in pages]
        self._sentence_terms = [p.sentence_terms for p in pages]
        self._echo_terms = _ECHO_TERMS
        self._labels = [c.source.lower() for c in self.sources if c.source]  # the prompt's source labels
        self._windows: list[tuple[int, tuple[float, int], int, list[str]]] | None = None

    def lexical(self, terms: set[str], n: int) -> float:
        """Share of `terms` found in source `n` (1-based), in [0, 1]."""
        return len(terms & self._terms[n - 1]) / len(terms) if terms else 0.0

    def weights(self, terms: set[str], n: int) -> list[float]:
        """How much each sentence of source `n` (1-based) shares of `terms`: the shared terms weighed by
        their rarity among the page's sentences ("browser" says more about which sentence is meant than
        "password" on the passwords page)."""
        page_terms = self._sentence_terms[n - 1]
        frequency: dict[str, int] = {}
        for sentence_terms in page_terms:
            for term in sentence_terms & terms:
                frequency[term] = frequency.get(term, 0) + 1
        return [sum(1 / frequency[t] for t in terms & sentence_terms) for sentence_terms in page_terms]

    def evidence(self, terms: set[str], n: int, max_chars: int = EVIDENCE_CHARS) -> tuple[str, float]:
        """The window of source `n` (1-based) shown to the judge for a sentence of `terms`: the source
        sentence sharing most of them (`weights`) with its neighbours up to `max_chars`, and the share
        of `terms` the window holds. Without shared terms, the source's opening."""
        page, page_terms = self._sentences[n - 1], self._sentence_terms[n - 1]
        if not page:
            return self._texts[n - 1][:max_chars], 0.0
        weight = self.weights(terms, n)
        lo = hi = max(range(len(page)), key=lambda i: (weight[i], -i))
        while True:  # widen towards the neighbour that adds most, within the budget
            size = sum(len(s) + 1 for s in page[lo : hi + 1])
            options = [j for j in (lo - 1, hi + 1) if 0 <= j < len(page) and size + len(page[j]) + 1 <= max_chars]
            if not options:
                break
            j = max(options, key=lambda j: (weight[j], j))
            lo, hi = min(lo, j), max(hi, j)
        window_terms = set().union(*page_terms[lo : hi + 1])
        share = len(terms & window_terms) / len(terms) if terms else 0.0
        return " ".join(page[lo : hi + 1])[: max_chars * 2], share

    def states_values_of(self, text: str, n: int) -> str:
        """"" when source `n` (1-based) holds every number and name of `text`, else which is missing
        ("numbers" or "names")."""
        return self._missing_values(numbers_in(text), names_in(text), n)

    def _missing_values(self, numbers: set[str], names: set[str], n: int) -> str:
        """`states_values_of` for a sentence's `numbers_in` and `names_in`, computed once per sentence
        by the caller rather than once per source."""
        if not numbers <= self._numbers[n - 1]:
            return "numbers"
        if any(name not in self._lower[n - 1] for name in names):
            return "names"
        return ""

    def _candidate(
        self, sentence: Sentence, terms: set[str], numbers: set[str], names: set[str], chinese: bool
    ) -> int | None:
        """The source (1-based) a sentence is judged against: among those holding its numbers and
        names, the one its marker names, else the one sharing most of its words (in either language
        through `translate`), else its marker's or the first in the other language. `terms`,
        `numbers`, `names` and `chinese` are the sentence's `content_terms`, `numbers_in`, `names_in`
        and whether it is Chinese (`cjk_share` at least `MIN_CJK_SHARE_ZH`)."""
        n_sources = len(self.sources)
        valid = [n for n in range(1, n_sources + 1) if not self._missing_values(numbers, names, n)]
        own = [n for n in sentence.markers if n in valid]
        if own:
            return own[0]
        if not valid:
            return None
        scores = {n: self.lexical(terms, n) for n in valid}
        across = [n for n in valid if self._chinese[n - 1] != chinese]
        if across and self.translate is not None:
            translation = self.translate(sentence.text)
            if translation:
                for n in across:
                    scores[n] = max(scores[n], translation.coverage(self._texts[n - 1]))
        best = max(valid, key=lambda n: (scores[n], -n))
        if scores[best] > 0:
            return best
        return across[0] if across else best

    def attribute(self, sentence: Sentence, *, as_claim: bool = False) -> Verdict:
        """The verdict on one sentence before the judge: echoes and non-claims settled, a claim either
        supported as a copy (`by="copy"`), unsupported for a number or name no source holds, or left
        for the judge (`source` None, `by` "", `candidate` and `passage` set)."""
        terms = content_terms(sentence.text)
        numbers = numbers_in(sentence.text)  # each feature of the sentence once, not once per source
        echo = len(terms) >= 2 and any(len(terms & e) / len(terms) >= MIN_ECHO_OVERLAP for e in self._echo_terms)
        # The prompt's label of a source ("handbook/…/travel/index.md — General guidance"), not a fact from it.
        lower = sentence.text.lower()
        echo = echo or any(label in lower for label in self._labels)
        echo = echo or is_question(sentence.text)
        claim = (
            len(terms) >= MIN_CLAIM_TERMS or bool(numbers) or (as_claim and bool(terms))
        ) and not is_lead_in(sentence.text)
        if not claim or echo or not self.sources:
            return Verdict(sentence, None, 0.0, claim, echo)
        names = names_in(sentence.text)
        chinese = cjk_share(sentence.text) >= MIN_CJK_SHARE_ZH
        n = self._candidate(sentence, terms, numbers, names, chinese)
        if n is None:  # no source holds its numbers (or names): the first source says which
            return Verdict(sentence, None, 0.0, True, by=self._missing_values(numbers, names, 1))
        passage, share = self.evidence(terms, n)
        if numbers and not numbers <= page_numbers(passage):  # the page's numbers, but not by the claim
            return Verdict(sentence, None, share, True, passage=passage, by="numbers", candidate=n)
        if share < MIN_JUDGED_SHARE and self._chinese[n - 1] == chinese:
            return Verdict(sentence, None, share, True, passage=passage, by="overlap", candidate=n)
        if share >= FAST_PATH_SHARE and is_negated(sentence.text) == is_negated(passage):
            return Verdict(sentence, n, share, True, passage=passage, by="copy", candidate=n)
        return Verdict(sentence, None, share, True, passage=passage, candidate=n)

    def prejudge(self, sentences: Sequence[Sentence], *, cut: bool = False) -> list[Verdict]:
        """`attribute` for each sentence, in order. An answer without a claim (every sentence short:
        "SG-Staff", "不可以。") has its sentences with content attributed as claims, unless it was
        `cut` at its token limit. The claims left for the judge have `candidate` set, `by` ""."""
        verdicts = [self.attribute(s) for s in sentences]
        if not cut and not any(v.claim and not v.echo for v in verdicts):
            verdicts = [
                self.attribute(v.sentence, as_claim=True)
                if not v.echo and content_terms(v.sentence.text) and not is_enumerator(v.sentence.text)
                and not is_fence(v.sentence.text) else v
                for v in verdicts
            ]
        if self.judge is None:  # no model: the lexical overlap decides
            for v in _pending(verdicts):
                ok = self.lexical(content_terms(v.sentence.text), v.candidate) >= MIN_LEXICAL
                v.source, v.by = (v.candidate if ok else None), "lexical"
        return verdicts

    async def check(self, sentences: Sequence[Sentence], *, cut: bool = False) -> list[Verdict]:
        """Verdicts on an answer's sentences, in order: `prejudge`, then one call of the judge for the
        claims it left.

        Raises:
            UpstreamUnavailableError: the judge's model server cannot be reached.
        """
        verdicts = self.prejudge(sentences, cut=cut)
        pending = _pending(verdicts)
        if pending and self.judge is not None:
            answers = await self.judge.judge([Pair(v.sentence.text, v.passage) for v in pending])
            for v, yes in zip(pending, answers):
                v.source, v.by = (v.candidate if yes else None), "judge"
        return verdicts

    def off_the_question(self, verdicts: Sequence[Verdict]) -> bool:
        """True when the answer's supported claims share no index term (`sparse.terms`) with the
        question (`topic`): supported by the sources, and about something else ("How do I apply for a
        company car?" answered with the hiring page). Never for an answer of fewer than
        `MIN_TOPIC_TERMS` words other than numbers (a bare value), nor without a question."""
        if not self._topic_terms:
            return False
        terms = set().union(*(sparse.terms(v.sentence.text) for v in verdicts if v.claim and not v.echo and v.source is not None))
        words = {t for t in terms if not _VALUE.fullmatch(t)}
        # Exact stems: on the first five letters, "married" met "marriage" (development capture en-13, a
        # right answer declined) but "apply" also met "application" (the company-car case above).
        return len(words) >= MIN_TOPIC_TERMS and not self._topic_terms & terms

    def quote_windows(self, *, min_share: float, min_terms: int, limit: int = 1) -> list[tuple[int, list[str]]]:
        """The windows of one or two source sentences holding most of the question's index terms
        (`sparse.terms` of `topic`, stemmed; those in the window's script; a Latin stem of 5 letters or
        more also held when it starts one of the window's: "marri" in "marriage"), at least `min_share`
        of them and `min_terms`: up to `limit` `(source number, sentences)`, one per source, best first
        (most of the question's terms, then the shorter). A window of headings and table headers only
        (`states_nothing`) is never one."""
        best: dict[int, tuple[tuple[float, int], list[str]]] = {}
        for n, score, found, window in self._scored_windows():
            if found >= min_terms and score[0] >= min_share and (n not in best or score > best[n][0]):
                best[n] = (score, window)
        ranked = sorted(best.items(), key=lambda item: (item[1][0], -item[0]), reverse=True)
        return [(n, window) for n, (_, window) in ranked[:limit]]

    def _scored_windows(self) -> list[tuple[int, tuple[float, int], int, list[str]]]:
        """Every quotable window of the sources, in order, as `(source number, (share of the question's
        terms, -characters), terms found, sentences)`: computed once per Grounder (`quote` and then
        `judged_quote` ask for them with different thresholds)."""
        if self._windows is not None:
            return self._windows
        wanted = self._topic_terms
        out: list[tuple[int, tuple[float, int], int, list[str]]] = []
        for n, page in enumerate(self._sentences, start=1):
            empty = [states_nothing(page, i) for i in range(len(page))]
            for i in range(len(page)):
                for window in (page[i : i + 1], page[i : i + 2]):  # one sentence, or with the next
                    if all(empty[i : i + len(window)]):
                        continue  # headings and table headers name a topic, they answer nothing
                    text = " ".join(window)[:QUOTE_CHARS]
                    chinese = cjk_share(text) >= MIN_CJK_SHARE_ZH
                    scope = {t for t in wanted if bool(_CJK_RUN.search(t)) == chinese}
                    found = sparse.found_terms(scope, text)
                    own = set(sparse.terms(text))
                    found |= {t for t in scope - found if len(t) >= 5 and not _CJK_RUN.search(t) and any(w.startswith(t) for w in own)}
                    score = (len(found) / len(scope) if scope else 0.0, -len(text))
                    out.append((n, score, len(found), list(window)))
        self._windows = out
        return out

    def quoted(self, n: int, window: Sequence[str]) -> str:
        """The extractive answer of `window` (sentences of source `n`): a short lead (`QUOTE_LEAD`), the
        sentences as a block quote, the source's marker."""
        body = "\n".join(f"> {' '.join(line.split()).strip('#*_- ')}" for line in window)
        return f"{QUOTE_LEAD[self.lang]}\n\n{body[:QUOTE_CHARS + 8]} [{n}]"

    def claim_windows(self, verdicts: Sequence[Verdict]) -> list[tuple[int, list[str]]]:
        """The source sentence each rejected claim of `verdicts` restates, as `(source number, [sentence])`
        in answer order: of the source sharing most of its words, the sentence sharing most (`weights`),
        when it holds one of the question's terms and states something (`states_nothing`). A small model
        that got a value wrong ("at least 12 characters" for "ideally 15 characters or longer") points at it."""
        out: list[tuple[int, list[str]]] = []
        for v in (v for v in verdicts if v.claim and not v.echo and v.source is None and self.sources):
            terms, marked = content_terms(v.sentence.text), v.sentence.markers
            n = max(range(1, len(self.sources) + 1), key=lambda n: (self.lexical(terms, n), n in marked, -n))
            page, weight = self._sentences[n - 1], self.weights(terms, n)
            i = max(range(len(page)), key=lambda i: (weight[i], -i), default=None)
            if i is not None and weight[i] and not states_nothing(page, i) and sparse.found_terms(self._topic_terms, page[i]):
                out += [] if (n, [page[i]]) in out else [(n, [page[i]])]
        return out

    async def judged_quote(self, verdicts: Sequence[Verdict] = ()) -> str | None:
        """An extractive answer the judge confirmed: of the sentences the rejected claims restate
        (`claim_windows`), then the `JUDGED_QUOTES` best windows of different sources holding at least
        `MIN_JUDGED_QUOTE_SHARE` of the question's terms (`quote_windows`), the first of `JUDGED_QUOTES`
        + 1 that the judge says answers the question (`EvidenceJudge.answers`, one call each), quoted
        (`quoted`). None when none does, or without a judge: the reader gets "not found".

        Raises:
            UpstreamUnavailableError: the judge's model server cannot be reached.
        """
        if self.judge is None or not self.question:
            return None
        await asyncio.to_thread(self._scored_windows)  # the scan of every window, off the event loop
        found = self.quote_windows(min_share=MIN_JUDGED_QUOTE_SHARE, min_terms=1, limit=JUDGED_QUOTES)
        candidates = list(dict.fromkeys((n, tuple(w)) for n, w in [*self.claim_windows(verdicts), *found]))
        for n, window in candidates[: JUDGED_QUOTES + 1]:
            if await self.judge.answers(self.question, " ".join(window)[:QUOTE_CHARS]):
                return self.quoted(n, window)
        return None


def _pending(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The claims that `Grounder.attribute` left for the judge."""
    return [v for v in verdicts if v.claim and not v.echo and v.source is None and not v.by and v.candidate]


def with_marker(text: str, n: int | None) -> str:
    """`text` with the marker `[n]` before its terminal punctuation (`... 15 characters [1].`)."""
    if n is None:
        return text
    end = re.search(r"[.!?。！？；:：]*$", text).start()
    space = "" if _CJK_RUN.search(text[-2:] if end < len(text) else text[-1:]) else " "
    return f"{text[:end]}{space}[{n}]{text[end:]}"


def segments(verdicts: Sequence[Verdict]) -> list[str]:
    """The text each sentence contributes to the grounded answer, in order ("" when removed); joined,
    they are the answer. A kept claim carries its source's marker (none inside a code block); a
    lead-in or list number is shown only when a supported sentence follows it; a
    removed sentence that opened a list item gives its bullet to the rest of its line, or takes the
    line with it, so that no empty list item is left; its line break stays when the line goes on."""
    supported_after = [False] * (len(verdicts) + 1)
    for i in range(len(verdicts) - 1, -1, -1):
        v = verdicts[i]
        supported_after[i] = supported_after[i + 1] or (v.kept and v.source is not None)
    out: list[str] = []
    fenced = False
    bullet = ""
    for i, v in enumerate(verdicts):
        text, fence = v.sentence.text, is_fence(v.sentence.text)
        held = is_lead_in(text) or is_enumerator(text.strip())  # shown only before a supported sentence
        show = fence or (v.kept and (v.source is not None or not held or supported_after[i + 1]))
        if not show:
            prefix = _LIST_PREFIX.match(text)
            if prefix and "\n" not in v.sentence.sep:
                bullet = prefix.group()  # the next sentence of this line inherits the item's bullet
            line_goes_on = out and out[-1] and "\n" not in out[-1][-1:] and "\n" in v.sentence.sep
            out.append("\n" if line_goes_on else "")
            if "\n" in v.sentence.sep:
                bullet = ""
            continue
        if bullet and not _LIST_PREFIX.match(text):
            text = bullet + text
        bullet = ""
        marker = None if (fenced or fence) else v.source
        if fence:
            fenced = not fenced
        out.append(with_marker(text, marker) + (v.sentence.sep or " "))
    return out


def render(verdicts: Sequence[Verdict]) -> str:
    """The grounded answer: `segments` joined, as valid Markdown (`markdown.tidy`: no empty list item
    or code block, balanced fences, ordered lists numbered in order)."""
    return tidy("".join(segments(verdicts)))


def supported_share(verdicts: Sequence[Verdict]) -> float:
    """Share of the claim characters (echoes excluded) that are supported, in [0, 1]; 0.0 without claims."""
    claims = [v for v in verdicts if v.claim and not v.echo]
    total = sum(len(v.sentence.text) for v in claims)
    if not total:
        return 0.0
    return sum(len(v.sentence.text) for v in claims if v.source is not None) / total


def declines(verdicts: Sequence[Verdict], text: str, *, cut: bool = False) -> bool:
    """True when an answer whose sentences got `verdicts` and whose grounded `text` is this is no
    answer: it states facts and less than `MIN_SUPPORTED_SHARE` of them is supported, or nothing is
    left (only echoes and words without content: `render` drops empty list items and code blocks). An
    answer `cut` before its first fact is kept as it is."""
    if any(v.claim and not v.echo for v in verdicts):
        return supported_share(verdicts) < MIN_SUPPORTED_SHARE
    return not (text.strip() if cut else content_terms(text))


@dataclass
class Grounded:
    """A grounded answer: `text` (with a marker after each supported sentence, a quote, or
    `NO_ANSWER`); `declined` when nothing supports an answer; `quoted` when a quote replaced the
    model's answer; the verdicts of all sentences, in order."""

    text: str
    declined: bool
    verdicts: list[Verdict] = field(default_factory=list)
    quoted: bool = False

    @property
    def cited(self) -> list[int]:
        """Source numbers the text cites, in order of first appearance."""
        return list(dict.fromkeys(v.source for v in self.verdicts if v.kept and v.source is not None))


def conclude(verdicts: list[Verdict], grounder: Grounder, *, lang: str = "en", cut: bool = False) -> Grounded:
    """The answer made of checked `verdicts` without a judge: the kept sentences (`render`), or
    `NO_ANSWER` when `declines` or `Grounder.off_the_question`."""
    text = render(verdicts)
    if declines(verdicts, text, cut=cut) or grounder.off_the_question(verdicts):
        return Grounded(NO_ANSWER[lang], True, verdicts)
    return Grounded(text, False, verdicts)


async def aconclude(verdicts: list[Verdict], grounder: Grounder, *, lang: str = "en", cut: bool = False) -> Grounded:
    """`conclude` with the judge: an answer that would be replaced gets the quote the judge confirmed
    answers the question (`Grounder.judged_quote`), else `NO_ANSWER`.

    Raises:
        UpstreamUnavailableError: the judge's model server cannot be reached.
    """
    text = render(verdicts)
    if declines(verdicts, text, cut=cut) or grounder.off_the_question(verdicts):
        quote = await grounder.judged_quote(verdicts)
        if quote is not None:
            return Grounded(quote, False, verdicts, quoted=True)
        return Grounded(NO_ANSWER[lang], True, verdicts)
    return Grounded(text, False, verdicts)


async def aground(answer: str, grounder: Grounder, *, lang: str = "en", cut: bool = False) -> Grounded:
    """Ground a whole answer (`Grounder.check`, then `aconclude`); unknown markers dropped first.

    Raises:
        UpstreamUnavailableError: the judge's model server cannot be reached.
    """
    sentences = split_sentences(drop_unknown_markers(answer, len(grounder.sources)))
    return await aconclude(await grounder.check(sentences, cut=cut), grounder, lang=lang, cut=cut)


def ground(answer: str, grounder: Grounder, *, lang: str = "en", cut: bool = False) -> Grounded:
    """`aground` for a grounder without a judge (near-copies and `MIN_LEXICAL` overlap decide), for
    synchronous callers such as finetune's dataset filter.

    Raises:
        ValueError: `grounder` has a judge (await `aground` instead).
    """
    if grounder.judge is not None:
        raise ValueError("ground() cannot call the judge: await aground() instead")
    sentences = split_sentences(drop_unknown_markers(answer, len(grounder.sources)))
    return conclude(grounder.prejudge(sentences, cut=cut), grounder, lang=lang, cut=cut)
