"""Value types shared by settings sections."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator


def _empty_is_unset(value: object) -> object:
    # `ASSISTANT_RERANKER_MODEL=` would otherwise be Path("."), the current folder.
    return None if isinstance(value, str) and not value.strip() else value


# A path that is unset when given as an empty (or blank) string.
OptionalPath = Annotated[Path | None, BeforeValidator(_empty_is_unset)]
