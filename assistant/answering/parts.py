"""A question split into its parts: several questions asked at once ("How often do I get a new laptop,
and how do I order one?", "年假有几天？怎么申请？") are answered one by one, so that none is dropped.

The split is by rule and deliberately narrow: it looks for explicit multi-part structure only,
    - several question sentences (each ends with "?"/"？", or opens as a question);
    - a numbered list of two or more items ("1. … 2. …", "1) …", "（1）…", "①…");
    - two questions joined in one sentence by "and", "and also", "also", "plus", ";" or a comma in
      English, or by "，"/"；" and 另外/以及/还有/并且/而且/同时/此外 in Chinese,
and it splits a sentence only where BOTH sides are questions on their own. "How do I reset my password
and log in again?" stays one question: what follows "and" ("log in again") does not open a question
(no question word, no auxiliary before its subject). "What it costs" after "and" is an embedded clause
(the subject comes before the verb), not a question. In Chinese the same holds with question words
(如何, 怎么, 什么, 哪, 多少, 几, 是否, 吗 …): "报销需要发票以及审批单吗？" is one question, since
"报销需要发票" asks nothing on its own.

Sentences that ask nothing ("I start today and got an email from Okta.") are context and go with every
part; a part that leans on the one before it ("… and how do I order one?": short, or led by a pronoun,
`rewrite.needs_rewrite`) is searched with that part in front, as a follow-up is rewritten from its
conversation, and asked as written. A first line that ends without a question mark and is followed by a blank line is a title
(a ticket's subject): context as well. A single question costs nothing beyond this scan: `split_question`
returns it whole and the answerer takes its usual path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.answering.rewrite import needs_rewrite
from assistant.core.index import sparse
from assistant.core.language import has_cjk

# Parts answered separately at most; the questions beyond are answered with the last part (each part is
# a full generation: on 2 CPU cores 20-60 s).
MAX_PARTS = 4
# A question line placed first (a subject) whose content words are mostly in a later part restates it.
TITLE_OVERLAP = 0.6

_WH = frozenset("how what which who whom whose when where why".split())
# Question adverbs: they open a question only with an auxiliary right after ("how many …" a few words on).
_ADVERBS = frozenset("how when where why".split())
_HOW_MUCH = frozenset("long many much often soon far old big".split())
_AUX = frozenset("do does did can could should would will is are am was were may might must shall".split())
_SUBJECTS = frozenset("i you we they he she it".split())
# Words that may lead a question clause without being part of it ("so how do I …", "also, can I …").
_LEADS = frozenset(
    "and also so but then plus ok okay please after before in on at for to with from by during within since until".split()
)
# What may stand after an auxiliary that opens a question: its subject.
_AUX_SUBJECT = re.compile(
    r"^(?:i|you|we|they|he|she|it|there|my|our|your|the|a|an|this|that|these|those|someone|anyone|anybody|"
    r"employees|contractors|managers|people|new)\b"
)
_WORDY = re.compile(r"[A-Za-z0-9\u4e00-\u9fff]")  # a part asks with words, not "??"
_EN_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
# English clause boundaries inside one sentence: a comma or semicolon, or "and"/"and also"/"also"/"plus".
_EN_JOINT = re.compile(r"\s*[,;]\s*(?:(?:and|plus)(?:\s+also)?\s+|also,?\s+)?|\s+(?:and|plus)(?:\s+also)?\s+")
_ZH_CUE = re.compile(
    r"如何|怎么|怎样|什么|哪|多少|多久|多长|(?<![好十百千万])几[个天周次年月种位点]|是否|能否|可否|有没有|是不是|能不能|可不可以|会不会|"
    r"为什么|为何|谁|吗|呢"
)
# A Chinese clause led by a wish, a condition or "not knowing" frames the question after it ("想判断…是不是…，
# 应该看哪个面板？"): its question word is embedded.
_ZH_SUBORDINATE = re.compile(r"(?:想要?|希望|如果|假如|要是|当|不知道|不清楚|为了)")
_ZH_JOINT = re.compile(r"[，,；;]\s*(?:另外|以及|还有|并且|而且|同时|此外)?|(?:另外|以及|还有|此外)")
# Sentence ends: ?, ！, 。 and the like always; "." or "!" only before a space and a capital, a digit,
# a CJK ideograph or the end (not "e.g. the", "2.5 years").
_SENTENCE_END = re.compile(r"(?<=[?？！。；])|(?<=[.!])(?=\s+[A-Z0-9\u4e00-\u9fff(\"“]|\s*$)|\n+")
_ENUM_ITEM = re.compile(r"(?:(?<=[\s?？。！!:：;；])|^)(?:\(?(\d{1,2})[.)）]|（(\d{1,2})）|([①②③④⑤⑥⑦⑧⑨]))\s*", re.MULTILINE)
_CIRCLED = "①②③④⑤⑥⑦⑧⑨"
_CONNECTOR = re.compile(r"^(?:(?:and|also|plus|so|but)\b(?:\s+also\b)?[,，]?\s*|(?:另外|以及|还有|并且|而且|同时|此外)[，,]?\s*)", re.I)


@dataclass(frozen=True)
class QuestionPart:
    """One question of a message.

    Attributes:
        text: the part as the reader wrote it, trimmed: how an answer names it ("I found nothing about …").
        question: what the model is asked: the statements that lead to the part (and the title, for the
            first part), then `text`.
        query: what is searched for it: `question`, after the question of the part before it when it
            leans on that one ("… and how do I order one?"). The model is asked `question` alone: given
            both, it answered the earlier one (helpdesk bench, docs/notes/answer-grounding-investigations.md).
    """

    text: str
    question: str
    query: str


def split_question(question: str, *, max_parts: int = MAX_PARTS) -> list[QuestionPart]:
    """The parts of `question`: one `QuestionPart` per question it asks (module docstring).

    Args:
        question: the reader's message (or a ticket's subject and latest message), English or Chinese.
        max_parts: parts at most (>= 1); the questions beyond it join the last part.

    Returns:
        `[QuestionPart(question, question, question)]` (the message whole) when it asks one question or none;
        else two to `max_parts` parts in the order asked.

    Raises:
        ValueError: `max_parts` below 1.
    """
    if max_parts < 1:
        raise ValueError(f"max_parts must be >= 1, got {max_parts}")
    whole = [QuestionPart(question.strip(), question.strip(), question.strip())]
    text = question.strip()
    if not text:
        return whole
    title, body = _title(text)
    title_asks = title.endswith(("?", "？"))
    # Each question with the statements before it (its setup); statements after the last go with it.
    asked: list[tuple[list[str], str]] = []
    setup: list[str] = [title] if title and not title_asks else []
    items = _enumerated(body)
    if items is not None:
        lead, found = items
        setup += [lead] if lead else []
        asked = [([], item) for item in found]
    else:
        for sentence in _sentences(body):
            for clause in _clauses(sentence):
                asked.append((setup, clause))
                setup = []
            if not _clauses(sentence):
                setup = [*setup, sentence]
    if title_asks and not _restated(title, [q for _, q in asked]):
        asked = [([], q) for q in _clauses(title)] + asked
    if asked and items is not None:
        asked[0] = (setup, asked[0][1])
    elif asked and setup:
        asked[-1] = (asked[-1][0] + setup, asked[-1][1])
    asked = [(context, _without_connector(q)) for context, q in asked]
    asked = [pair for i, pair in enumerate(asked) if pair[1] not in [q for _, q in asked[:i]]]
    if len(asked) < 2:
        return whole
    if len(asked) > max_parts:
        merged = " ".join(q for _, q in asked[max_parts - 1 :])
        asked = [*asked[: max_parts - 1], (asked[max_parts - 1][0], merged)]
    parts: list[QuestionPart] = []
    for context, part in asked:
        lean = ""
        if parts and needs_rewrite(part, [{"role": "user", "content": parts[-1].text}]):
            lean = parts[-1].query
        prefix = " ".join(_ended(c.strip()) for c in context if c.strip())
        asked_as = " ".join(t for t in (prefix, part) if t)
        parts.append(QuestionPart(part, asked_as, " ".join(t for t in (lean, asked_as) if t)))
    return parts


def _without_connector(question: str) -> str:
    """A part without the connector that joined it to the one before, capitalised ("and am I …" ->
    "Am I …", "另外，…" -> "…")."""
    rest = _CONNECTOR.sub("", question, count=1) or question
    return rest[0].upper() + rest[1:]


def _title(text: str) -> tuple[str, str]:
    """`(title, body)`: a first line followed by a blank line is a title (a ticket's subject); else no
    title. A title without a question mark is context; one with it is a part unless the body asks it again."""
    head, sep, rest = text.partition("\n\n")
    if sep and rest.strip() and "\n" not in head.strip():
        return head.strip(), rest.strip()
    return "", text


def _enumerated(text: str) -> tuple[str, list[str]] | None:
    """`(lead, items)` when `text` is a numbered list of at least two items numbered 1, 2, … in order
    (the text before item 1 is the lead, e.g. "Two questions:"); else None."""
    marks = []
    expected = 1
    for m in _ENUM_ITEM.finditer(text):
        number = int(m.group(1) or m.group(2) or 0) or _CIRCLED.index(m.group(3)) + 1
        if number == expected:
            marks.append(m)
            expected += 1
    if len(marks) < 2:
        return None
    items = [text[m.end() : (marks[i + 1].start() if i + 1 < len(marks) else len(text))].strip() for i, m in enumerate(marks)]
    if any(not item for item in items):
        return None
    return text[: marks[0].start()].strip(), items


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _clauses(sentence: str) -> list[str]:
    """The questions in one sentence: [] when it asks none, [sentence] when it asks one, else each."""
    zh = has_cjk(sentence)
    if not (_zh_question(sentence) if zh else _en_question(sentence)):
        return []
    joint = _ZH_JOINT if zh else _EN_JOINT
    pieces, start = [], 0
    for m in joint.finditer(sentence):
        left, right = sentence[start : m.start()], sentence[m.end() :]
        if zh:
            ok = (bool(_ZH_CUE.search(left)) and not _ZH_SUBORDINATE.match(left.strip())
                  and bool(_ZH_CUE.search(_next_clause(right, _ZH_JOINT))))
        else:
            ok = _en_opens_question(left, anywhere=not pieces) and _en_opens_question(right)
        if ok and left.strip() and right.strip():
            pieces.append(sentence[start : m.start()].strip(" ,，;；"))
            start = m.end()
    pieces.append(sentence[start:].strip(" ,，;；"))
    return [_as_question(p, zh=zh) for p in pieces if _WORDY.search(p)]


def _next_clause(text: str, joint: re.Pattern) -> str:
    m = joint.search(text)
    return text[: m.start()] if m else text


def _as_question(piece: str, *, zh: bool) -> str:
    """A split-off piece ends with a question mark, as a question does."""
    if piece.endswith(("?", "？", ".", "。", "!", "！")):
        return piece
    return piece + ("？" if zh else "?")


def _ended(text: str) -> str:
    """`text` with a full stop when it has no end mark (a subject line used as context)."""
    if text.endswith(("?", "？", ".", "。", "!", "！", ":", "：")):
        return text
    return text + ("。" if has_cjk(text) else ".")


def _zh_question(sentence: str) -> bool:
    return sentence.rstrip().endswith(("?", "？")) or bool(_ZH_CUE.search(sentence))


def _en_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or _en_opens_question(sentence, anywhere=True)


def _en_opens_question(clause: str, *, anywhere: bool = False) -> bool:
    """Whether `clause` opens as a direct question: a question word not followed by its subject ("how
    do I …", "what happens …", "which one is …"; not "what it costs"), or an auxiliary followed by a
    subject ("can I …", "is there …", "does it …"; not "do it"). With `anywhere`, the question may
    also start after a comma ("After my upgrade, can I buy …")."""
    starts = [clause]
    if anywhere:
        starts += [piece for piece in re.split(r"[,;:]", clause)[1:]]
    for start in starts:
        words = _EN_WORD.findall(start.lower())
        while words and words[0] in _LEADS:
            words = words[1:]
        if not words:
            continue
        first, rest = words[0], words[1:]
        if first in _ADVERBS:  # "when is …", "how do …", "how many weeks do …"; not "when my report changes"
            reach = 5 if first == "how" and rest and rest[0] in _HOW_MUCH else 1
            for word in rest[:reach]:
                if word in _AUX:
                    return True
                if word in _SUBJECTS:
                    break  # "how long it takes"
        elif first in _WH:
            for word in rest[:2]:
                if word in _AUX:
                    return True
                if word in _SUBJECTS:
                    break  # "what it costs": an embedded clause
            else:
                return True
        elif first in _AUX and rest and _AUX_SUBJECT.match(rest[0]) and not (first == "do" and rest[0] == "it"):
            return True
    return False


def _content_words(text: str) -> set[str]:
    if has_cjk(text):
        cjk = re.sub(r"[^\u4e00-\u9fff]", "", text)
        return {cjk[i : i + 2] for i in range(len(cjk) - 1)}
    return {w.rstrip("s") for w in _EN_WORD.findall(text.lower()) if w not in sparse.STOP_EN}


def _restated(title: str, asked: list[str]) -> bool:
    """Whether the content words of a question `title` are mostly (`TITLE_OVERLAP`) in one question of
    the body: a subject asked again in the message is one part, not two."""
    words = _content_words(title)
    return bool(words) and any(len(words & _content_words(q)) >= TITLE_OVERLAP * len(words) for q in asked)
