"""Judged questions for evaluation: one JSON object per line (`id`, `lang`, `question`,
`answer_files`, `must_contain_any`); an empty `answer_files` means the corpus holds no answer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from assistant.core.errors import InvalidRequestError

LANGS = ("en", "zh")


@dataclass(frozen=True)
class Question:
    """One judged question.

    Attributes:
        answer_files: paths relative to the ingested root of their corpus (the chunks' `source`);
            any one of them answers the question. Empty: the corpus holds no answer.
        must_contain_any: key facts; an answer containing any one of them (case-insensitive) counts
            as containing a key fact.
    """

    id: str
    lang: str
    question: str
    answer_files: tuple[str, ...]
    must_contain_any: tuple[str, ...]

    @property
    def answerable(self) -> bool:
        """True when some file of the corpus answers the question."""
        return bool(self.answer_files)


def load_questions(path: Path) -> list[Question]:
    """Read a JSONL file of questions.

    Raises:
        InvalidRequestError: a line is not a JSON object with the fields above, a `lang` is not
            `en` or `zh`, or an `id` repeats (the message names the file and line).
    """
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
            question = Question(
                id=str(row["id"]),
                lang=str(row["lang"]),
                question=str(row["question"]),
                answer_files=tuple(str(f) for f in row.get("answer_files", [])),
                must_contain_any=tuple(str(f) for f in row.get("must_contain_any", [])),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidRequestError(f"{where}: not a question object ({type(exc).__name__}: {exc})") from exc
        if question.lang not in LANGS:
            raise InvalidRequestError(f"{where}: lang {question.lang!r} is not one of {', '.join(LANGS)}")
        if question.id in seen:
            raise InvalidRequestError(f"{where}: id {question.id!r} appears twice")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise InvalidRequestError(f"{path}: no questions")
    return questions
