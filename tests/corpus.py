"""Where the shared corpus lives (read in place, never copied) and the example questions of its README."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from assistant.core.language import has_cjk

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
CORPUS = SHARED / "corpus"
HANDBOOK = CORPUS / "handbook-en" / "sourcegraph-handbook" / "content"
DOCS_ZH = CORPUS / "docs-zh" / "pingcap-docs-cn"
FORMATS = CORPUS / "formats"


@dataclass(frozen=True)
class ExampleQuestion:
    question: str
    answer_file: str
    root: Path


def readme_questions() -> list[ExampleQuestion]:
    """The example questions table of corpus/README.md, parsed at test time."""
    text = (CORPUS / "README.md").read_text(encoding="utf-8")
    section = text.split("## Example questions", 1)[1]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[1].startswith("`"):
            continue
        answer_file = cells[1].strip("`")
        root = DOCS_ZH if has_cjk(cells[0]) else HANDBOOK
        out.append(ExampleQuestion(cells[0].replace("\\|", "|"), answer_file, root))
    return out
