"""Sparse (BM25-style) vectors for keyword retrieval in English and Chinese, computed once per chunk.

Documents get the BM25 term-frequency saturation `tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`
(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009); the IDF factor
is applied by Qdrant at query time (sparse vector `modifier=IDF`), so no index is rebuilt per query.
Chinese is segmented with jieba (search mode, which also emits the shorter words inside long ones);
other text is lower-cased, split on word characters, stripped of stop words and Snowball-stemmed.
"""

from __future__ import annotations

import logging
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from functools import lru_cache

import jieba
import snowballstemmer

from assistant.core.language import CJK_RUN as _CJK
from assistant.core.vectorstore.base import SparseEmbedding

jieba.setLogLevel(logging.WARNING)

K1 = 1.2
B = 0.75
AVG_CHUNK_TERMS = 120.0  # chunks are cut to a near-constant token length, so a fixed avgdl is close

_WORD = re.compile(r"[^\W_]+(?:[._-][^\W_]+)*", re.UNICODE)
STOP_EN = frozenset(
    "a an and are as at be been but by can could did do does for from had has have how i if in into is it "
    "its may me my no not of on or our should so than that the their them then there these they this to "
    "was we were what when where which who why will with would you your".split()
)
STOP_ZH = frozenset("的 了 是 在 和 与 及 或 有 我 你 他 她 它 们 这 那 吗 呢 吧 啊 怎么 什么 如何 为什么 哪些 一个 可以 需要 应该".split())
_stemmer = snowballstemmer.stemmer("english")


def _term_index(term: str) -> int:
    # A stable 31-bit hash: the same term maps to the same dimension in every process and release.
    return zlib.crc32(term.encode("utf-8")) & 0x7FFFFFFF


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Snowball (Porter 2) English stem of a lower-case word, as index terms carry it."""
    stemmed: str = _stemmer.stemWord(word)  # snowballstemmer is unannotated
    return stemmed


def terms(text: str) -> list[str]:
    """Index terms of `text`: jieba words for Chinese runs, stemmed lower-case words otherwise."""
    text = unicodedata.normalize("NFKC", text)
    out: list[str] = []
    pos = 0
    for match in _CJK.finditer(text):
        out.extend(_latin_terms(text[pos : match.start()]))
        out.extend(w for w in jieba.cut_for_search(match.group()) if w.strip() and w not in STOP_ZH)
        pos = match.end()
    out.extend(_latin_terms(text[pos:]))
    return out


def _latin_terms(text: str) -> list[str]:
    words = []
    for raw in _WORD.findall(text.lower()):
        if raw in STOP_EN or len(raw) > 40 or (len(raw) == 1 and raw.isalpha()):
            continue  # single letters are the `s` of "browser's", initials, list markers
        if "-" in raw or "." in raw or "_" in raw:  # keep `skip-grant-table` whole, and its parts
            words.append(raw)
            words.extend(stem(p) for p in re.split(r"[._-]", raw) if p and p not in STOP_EN)
        else:
            words.append(stem(raw))
    return words


def _merge(counts: Counter[str], weigh: Callable[[float], float]) -> SparseEmbedding:
    by_index: dict[int, float] = {}
    for term, tf in counts.items():
        idx = _term_index(term)
        by_index[idx] = by_index.get(idx, 0.0) + weigh(tf)
    indices = sorted(by_index)
    return SparseEmbedding(indices=indices, values=[float(by_index[i]) for i in indices])


def encode_document(text: str) -> SparseEmbedding:
    """Sparse vector of one chunk: BM25 term-frequency weights (IDF is Qdrant's)."""
    counts = Counter(terms(text))
    length = sum(counts.values()) or 1
    norm = K1 * (1 - B + B * length / AVG_CHUNK_TERMS)
    return _merge(counts, lambda tf: tf * (K1 + 1) / (tf + norm))


def encode_query(text: str, *, extra: Mapping[str, float] | None = None) -> SparseEmbedding:
    """Sparse vector of a question: weight 1 per distinct term (IDF is Qdrant's).

    Args:
        extra: more index terms with their weights (e.g. the question's translations); a term that
            is also the question's own keeps weight 1.
    """
    weights = dict(extra or {})
    weights.update((t, 1.0) for t in terms(text))
    return _merge(Counter(weights), lambda w: float(w))


def found_terms(query_terms: Collection[str], text: str) -> set[str]:
    """Those of `query_terms` (from `terms`) that occur in `text`.

    Chinese terms are looked up as substrings (no segmentation of `text`, which keeps this cheap
    enough to run on every hit); other terms among the stemmed words of `text`.
    """
    wanted = set(query_terms)
    if not wanted:
        return set()
    latin, lowered = _lookup_forms(text)
    return {t for t in wanted if (t in lowered if _CJK.search(t) else t in latin)}


@lru_cache(maxsize=64)
def _lookup_forms(text: str) -> tuple[frozenset[str], str]:
    # One search asks about the same few hits several times (coverage of the question, of its
    # translation, unknown terms): stem each hit's words once. Keyed by the text itself; a search
    # touches about ten texts, so 64 serve concurrent searches without keeping a corpus in memory.
    text = unicodedata.normalize("NFKC", text)
    return frozenset(_latin_terms(_CJK.sub(" ", text))), text.lower()


def clear_lookup_cache() -> None:
    """Forget the stemmed forms `found_terms` keeps of recent texts (benchmarks: each search cold)."""
    _lookup_forms.cache_clear()


def term_coverage(query_terms: Collection[str], text: str) -> float:
    """Share of distinct `query_terms` that occur in `text` (see `found_terms`), in [0, 1]; 0 when
    there is no query term."""
    wanted = set(query_terms)
    return len(found_terms(wanted, text)) / len(wanted) if wanted else 0.0


def hyphenations(text: str, *, min_length: int = 5) -> dict[str, list[str]]:
    """Hyphenated spellings of the closed compound words of `text`, by the index term of each word.

    "autofill" -> {"autofil": ["a-utofill", "au-tofill", "aut-ofill", "auto-fill", "autof-ill", ...]}:
    every split with a first part of at least one letter and a second of at least two. The index
    keeps a hyphenated word whole as a term of its own (`_latin_terms`), so one keyword lookup per
    spelling tells whether the documents write the word that way ("e-mail", "auto-fill").

    Args:
        text: a question (Latin words are considered; CJK runs are not).
        min_length: shortest word considered, in characters.

    Returns:
        index term -> hyphenated spellings (lower case), for words without a separator.
    """
    out: dict[str, list[str]] = {}
    for raw in _WORD.findall(_CJK.sub(" ", unicodedata.normalize("NFKC", text)).lower()):
        if len(raw) < min_length or raw in STOP_EN or not raw.isalpha():
            continue
        out.setdefault(stem(raw), []).extend(f"{raw[:i]}-{raw[i:]}" for i in range(1, len(raw) - 1))
    return out


def term_vector(term: str) -> SparseEmbedding:
    """The query vector of one index term (to ask the store whether any chunk contains it)."""
    return SparseEmbedding(indices=[_term_index(term)], values=[1.0])
