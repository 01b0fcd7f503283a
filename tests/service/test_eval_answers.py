"""`assistant eval` with answers, end to end: a real index of a few corpus files (read in place), the
real default chat model, English and Chinese questions and a no-answer one; the answer metrics (key
fact, cited answer file, answer language, declines) come out per question and per language, well formed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from assistant.cli.main import app
from assistant.core.settings import get_settings
from tests.corpus import DOCS_ZH, HANDBOOK

SECURITY = HANDBOOK / "departments/tech-ops/process/internal-security"
QUESTIONS = [
    {"id": "en-answerable", "lang": "en", "question": "How long should my passwords be?",
     "answer_files": ["passwords.md"], "must_contain_any": ["15"]},
    {"id": "zh-answerable", "lang": "zh", "question": "忘记了 TiDB 的 root 密码，怎么重置？",
     "answer_files": ["user-account-management.md"], "must_contain_any": ["skip-grant-table"]},
    {"id": "zh-crosslingual", "lang": "zh", "question": "访问公司数据之前，笔记本电脑需要做哪些设置？",
     "answer_files": ["computer-standards.md"], "must_contain_any": ["FileVault", "encryption", "加密"]},
    {"id": "en-no-answer", "lang": "en", "question": "How many weeks of paid sabbatical do employees get after five years?",
     "answer_files": [], "must_contain_any": []},
]
RATE_KEYS = ("answer_rate", "abstention_rate", "cites_answer_file", "has_key_fact", "same_language")


@pytest.fixture
def small_index(tmp_path, monkeypatch):
    """A data folder with a handbook folder of five pages and one Chinese page, ingested in place
    (sources known relative to the folder, the lone page by its name), and a short answer limit:
    the test checks the path, not the prose."""
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ASSISTANT_LLM_MAX_TOKENS", "64")
    get_settings.cache_clear()
    for path in (SECURITY, DOCS_ZH / "user-account-management.md"):
        result = CliRunner().invoke(app, ["ingest", str(path), "--json"])
        assert result.exit_code == 0, result.output
        assert {json.loads(line)["status"] for line in result.stdout.splitlines()} == {"done"}
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in QUESTIONS), encoding="utf-8")
    yield questions
    get_settings.cache_clear()


@pytest.mark.slow
def test_eval_with_answers_scores_facts_citations_language_and_declines(small_index):
    result = CliRunner().invoke(app, ["eval", str(small_index), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["config"]["answers"] is True and report["warnings"] == []  # every answer file is indexed
    by_id = {q["id"]: q for q in report["questions"]}
    assert set(by_id) == {q["id"] for q in QUESTIONS}
    for asked in QUESTIONS:
        got = by_id[asked["id"]]
        answer = got["answer"]
        assert isinstance(answer, str) and isinstance(got["abstained"], bool)
        assert isinstance(got["cited"], list)
        # The language metric, checked against the answer actually produced: no ideograph means not
        # Chinese; at least as many ideographs as Latin letters means Chinese.
        ideographs = sum("\u4e00" <= ch <= "\u9fff" for ch in answer)
        letters = sum(ch.isascii() and ch.isalpha() for ch in answer)
        if not ideographs:
            assert got["answer_lang"] in ("en", None), answer
        elif ideographs >= letters:
            assert got["answer_lang"] == "zh", answer
        assert got["same_language"] is (got["answer_lang"] == asked["lang"])
        if asked["answer_files"]:
            assert isinstance(got["cites_answer_file"], bool) and isinstance(got["has_key_fact"], bool)
            # a cited answer file is one the answer's citations name, never one it does not
            assert not got["cites_answer_file"] or set(asked["answer_files"]) & set(got["cited"])
            # a key fact is counted only when the answer holds one and does not decline
            assert got["has_key_fact"] is (not got["abstained"] and any(
                f.lower() in answer.lower() for f in asked["must_contain_any"]))
        else:
            assert got["cites_answer_file"] is None and got["has_key_fact"] is None
    groups = report["groups"]
    for name in ("en", "zh", "all"):
        for key in RATE_KEYS:
            value = groups[name][key]
            assert value is None or 0.0 <= value <= 1.0, (name, key, value)
    questions = report["questions"]
    assert groups["all"]["same_language"] == pytest.approx(sum(q["same_language"] for q in questions) / len(questions))
    assert groups["en"]["abstention_rate"] == float(by_id["en-no-answer"]["abstained"])
    assert groups["zh"]["abstention_rate"] is None  # no Chinese no-answer question in this set
    zh = [by_id["zh-answerable"], by_id["zh-crosslingual"]]
    assert groups["zh"]["cites_answer_file"] == pytest.approx(sum(q["cites_answer_file"] for q in zh) / 2)
