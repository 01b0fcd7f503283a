"""Judged questions for evaluation: one JSON object per line (`id`, `lang`, `question`,
`answer_files`, `must_contain_any`); an empty `answer_files` means the corpus holds no answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from assistant.core.errors import InvalidRequestError, not_utf8
from assistant.core.questions import check_query


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


class _Row(BaseModel):
    """One line of a question file, checked strictly: a typo in a key or a string where a list belongs
    would otherwise change what the question means (an answerable question read as a no-answer one)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: StrictStr | StrictInt
    lang: Literal["en", "zh"]
    question: StrictStr
    answer_files: list[StrictStr] = []
    must_contain_any: list[StrictStr] = []


def load_questions(path: Path) -> list[Question]:
    """Read a JSONL file of questions (UTF-8, with or without a byte-order mark; one JSON object per
    line; blank lines skipped).

    Raises:
        InvalidRequestError: the file cannot be read as UTF-8 text; a line is not a JSON object with
            exactly the fields above and their types (`id` a string or integer, `lang` `en` or `zh`,
            `question` a string the product would accept, the two lists lists of strings); or an
            `id` repeats. The message names the file, the line and the field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is fine
    except FileNotFoundError:
        raise InvalidRequestError(f"{path}: no such question file") from None
    except IsADirectoryError:
        raise InvalidRequestError(f"{path}: is a folder, not a question file (JSONL)") from None
    except UnicodeDecodeError as exc:
        raise not_utf8(str(path), exc) from None
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = _Row.model_validate_json(line)
        except ValidationError as exc:
            raise InvalidRequestError(f"{where}: not a question object ({_describe(exc)})") from None
        try:
            check_query(row.question)
        except InvalidRequestError as exc:
            raise InvalidRequestError(f"{where}: {exc}") from None
        question = Question(
            id=str(row.id), lang=row.lang, question=row.question,
            answer_files=tuple(row.answer_files), must_contain_any=tuple(row.must_contain_any),
        )
        if question.id in seen:
            raise InvalidRequestError(f"{where}: id {question.id!r} appears twice")
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise InvalidRequestError(f"{path}: no questions")
    return questions


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(p) for p in error["loc"]) or "line"
        if error["type"] == "extra_forbidden":
            parts.append(f"{field}: unknown field (expected {', '.join(_Row.model_fields)})")
        elif error["type"] == "missing":
            parts.append(f"{field}: missing")
        else:
            parts.append(f"{field}: {error['msg']}")
    return "; ".join(parts)
