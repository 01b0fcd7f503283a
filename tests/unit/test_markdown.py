"""What is left of an answer after the evidence check removed sentences is valid Markdown
(`assistant.answering.markdown.tidy`): crafted cases of what removal leaves behind."""

from __future__ import annotations

import re

import pytest

from assistant.answering.markdown import tidy

CASES = [
    # An empty ```shell block (its only command removed) and two empty list items: demo docs, issue 42.
    (
        "每月微调的步骤：\n1. 运行以下命令 [1]。\n```shell\n\n```\n2.\n3. 查看报告 [1]。\n- **\n- [2]",
        "每月微调的步骤：\n1. 运行以下命令 [1]。\n2. 查看报告 [1]。",
    ),
    # A block left open by a cut answer is closed; one with nothing in it goes.
    ("Run:\n```bash\nassistant doctor\n", "Run:\n```bash\nassistant doctor\n```"),
    ("Run:\n```bash\n  \n", "Run:"),
    # Each ordered list counts from its own first number; a paragraph ends a list; a nested list is its own.
    ("1. a\n3. b\n\nThen:\n5. c\n7. d\n   - x\n   -\n9. e", "1. a\n2. b\n\nThen:\n5. c\n6. d\n   - x\n7. e"),
    ("1、打开设置。\n3、保存。", "1、打开设置。\n2、保存。"),
    # An item whose content is an indented block is kept; code is never touched.
    ("1.\n   ```sh\n   ls\n   ```\n2. b", "1.\n   ```sh\n   ls\n   ```\n2. b"),
    ("```text\n1. a\n3. b\n-\n```", "```text\n1. a\n3. b\n-\n```"),
    # Not list items: a decimal number, a sentence ending a line.
    ("About 2.5 years.\n\n\n\n- ok", "About 2.5 years.\n\n- ok"),
]


@pytest.mark.parametrize(("text", "tidied"), CASES)
def test_removal_leaves_no_empty_item_or_block_and_lists_count_in_order(text, tidied):
    assert tidy(text) == tidied
    fences = [line for line in tidied.splitlines() if line.lstrip().startswith("```")]
    assert len(fences) % 2 == 0  # balanced
    # No item without words at the top level, but for one whose content is the indented block below it.
    prose = re.sub(r"(?ms)^```.*?^```$", "", tidied)
    assert not re.search(r"(?m)^(?:[-*+]|\d+[.)、])[ \t]*$(?!\n[ \t]+\S)", prose)
    assert tidy(tidied) == tidied  # idempotent
