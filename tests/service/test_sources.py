"""Sources: `make run`'s demonstration on the product's docs/ lives in a data folder of its own that a
company's index never shares, and `assistant sources remove` takes a source's chunks out of the index."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assistant.cli.main import app
from assistant.composition import Assistant
from assistant.core.principals import ANONYMOUS
from assistant.core.settings import get_settings
from tests.conftest import copy_subset, make_settings, open_resources
from tests.corpus import DOCS_ZH, HANDBOOK, REPO

PASSWORDS = "departments/tech-ops/process/internal-security/passwords.md"
STANDARDS = "departments/tech-ops/process/internal-security/computer-standards.md"
ROOT_RESET = "user-account-management.md"


def make_run_commands(*args: str) -> dict[str, dict[str, str]]:
    """The `assistant ingest` and `assistant serve` lines of `make -n run ARGS`: per command, the
    environment assignments that precede it and its arguments (`argv`)."""
    printed = subprocess.run(
        ["make", "-n", "-C", str(REPO), "run", *args], capture_output=True, text=True, check=True
    ).stdout
    commands = {}
    for line in printed.splitlines():
        if "/assistant ingest" not in line and "/assistant serve" not in line:
            continue  # the install steps
        words = shlex.split(line)
        at = next((i for i, w in enumerate(words) if w.endswith("/assistant")), None)
        if at is None or at + 1 >= len(words) or words[at + 1] not in ("ingest", "serve"):
            continue
        env = dict(w.split("=", 1) for w in words[:at])
        commands[words[at + 1]] = {**env, "argv": " ".join(words[at + 1 :])}
    return commands


def cli(*args: str, data_dir: Path) -> dict | list:
    """Run `assistant ARGS --json` on `data_dir`: its JSON document, or the list of its JSON lines."""
    get_settings.cache_clear()
    result = CliRunner().invoke(app, [*args, "--json"], env={"ASSISTANT_DATA_DIR": str(data_dir)})
    get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    try:
        return json.loads(result.stdout)  # one JSON document
    except json.JSONDecodeError:  # JSON lines (ingest)
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def sources_found(data_dir: Path, queries: list[str]) -> set[str]:
    """Every source among the best 50 chunks of each query, as an anonymous reader of `data_dir`."""
    res = open_resources(make_settings(data_dir))
    try:
        retriever = Assistant.build(res).retriever
        return {c.source for q in queries for c in retriever.retrieve(q, principal=ANONYMOUS, top_k=50)}
    finally:
        res.close()


def test_make_run_demonstrates_in_a_data_folder_of_its_own():
    commands = make_run_commands()
    demo = commands["ingest"].get("ASSISTANT_DATA_DIR")
    assert commands["ingest"]["argv"] == "ingest docs"
    assert demo and Path(demo) != Path("var")  # not the company's default data folder
    assert commands["serve"].get("ASSISTANT_DATA_DIR") == demo  # it serves what it ingested
    company = make_run_commands("DOCS=/srv/handbook")  # a company's folder goes to its own data folder
    assert company["ingest"]["argv"] == "ingest /srv/handbook"
    assert "ASSISTANT_DATA_DIR" not in company["ingest"] and "ASSISTANT_DATA_DIR" not in company["serve"]
    guarded = make_run_commands("DOCS=/srv/handbook", "ACL=/srv/acl.yaml")  # with its ACL manifest from the start
    assert guarded["ingest"]["argv"] == "ingest /srv/handbook --acl /srv/acl.yaml"


def test_a_company_index_and_the_demo_never_return_each_others_chunks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative data folders, as `make run` uses them, land here
    demo_dir = tmp_path / make_run_commands()["ingest"]["ASSISTANT_DATA_DIR"]
    company_dir = tmp_path / "var"  # the default ASSISTANT_DATA_DIR
    # Every page of the docs is indexed but the benchmark results and the investigation notes; they and
    # the screenshots beside the pages are left out by docs/.assistantignore.
    demo_pages = {
        rel for p in (REPO / "docs").rglob("*.md")
        if (rel := p.relative_to(REPO / "docs").as_posix()) != "benchmarks.md" and not rel.startswith("notes/")
    }
    rows = cli("ingest", str(REPO / "docs"), data_dir=demo_dir)
    demo_files = {r["source"] for r in rows if r["status"] == "done"}
    assert demo_files == demo_pages and {r["source"] for r in rows} == demo_pages
    company = copy_subset(HANDBOOK, tmp_path / "handbook", [PASSWORDS, STANDARDS])
    rows = cli("ingest", str(company), data_dir=company_dir)
    assert {r["source"] for r in rows} == {PASSWORDS, STANDARDS}

    # Questions about either side's content, asked on both sides.
    queries = ["How long should my passwords be?", "What must my laptop have before I access company data?",
               "recall@5 of the embedding model", "ASSISTANT_DATA_DIR configuration setting",
               "新员工入职第一天需要做什么？"]
    found_by_company = sources_found(company_dir, queries)
    found_in_demo = sources_found(demo_dir, queries)
    assert found_by_company and found_by_company <= {PASSWORDS, STANDARDS}
    assert found_in_demo and found_in_demo <= demo_files
    assert [s["path"] for s in cli("sources", "list", data_dir=company_dir)] == [str(company)]
    assert [s["path"] for s in cli("sources", "list", data_dir=demo_dir)] == [str(REPO / "docs")]


def test_removing_a_source_removes_its_chunks_and_documents(tmp_path):
    data_dir = tmp_path / "var"
    folder = copy_subset(HANDBOOK, tmp_path / "handbook", [PASSWORDS, STANDARDS])
    cli("ingest", str(folder), data_dir=data_dir)
    lone = cli("ingest", str(DOCS_ZH / ROOT_RESET), data_dir=data_dir)  # a file source, read in place: one line
    assert lone["status"] == "done" and lone["chunks"] > 0
    listed = {s["path"]: s for s in cli("sources", "list", data_dir=data_dir)}
    assert listed[str(folder)]["documents"] == 2 and listed[str(DOCS_ZH / ROOT_RESET)]["documents"] == 1

    removed = cli("sources", "remove", str(folder), data_dir=data_dir)
    assert removed == {"path": str(folder), "documents": 2, "chunks": listed[str(folder)]["chunks"]}
    assert [s["path"] for s in cli("sources", "list", data_dir=data_dir)] == [str(DOCS_ZH / ROOT_RESET)]
    res = open_resources(make_settings(data_dir))
    try:
        assert res.store.count() == lone["chunks"]  # only the lone file's chunks are left
    finally:
        res.close()
    assert sources_found(data_dir, ["How long should my passwords be?", "laptop disk encryption"]) == {ROOT_RESET}

    # Gone is gone: a second removal names the problem; ingesting the folder again starts afresh.
    get_settings.cache_clear()
    again = CliRunner().invoke(app, ["sources", "remove", str(folder)], env={"ASSISTANT_DATA_DIR": str(data_dir)})
    assert again.exit_code == 2 and "no source is registered" in again.output
    rows = cli("ingest", str(folder), data_dir=data_dir)
    assert {r["status"] for r in rows} == {"done"}  # re-embedded, not skipped as unchanged
    get_settings.cache_clear()
    last = CliRunner().invoke(app, ["sources", "remove", str(DOCS_ZH / ROOT_RESET)], env={"ASSISTANT_DATA_DIR": str(data_dir)})
    assert last.exit_code == 0 and f": 1 document, {lone['chunks']} chunk" in last.output, last.output  # not "1 documents"
    assert sources_found(data_dir, ["忘记了 TiDB 的 root 密码，怎么重置？"]) <= {PASSWORDS, STANDARDS}


def test_an_ignore_file_keeps_files_out_of_the_index_and_takes_them_out_later(tmp_path):
    data_dir = tmp_path / "var"
    folder = copy_subset(HANDBOOK, tmp_path / "handbook", [PASSWORDS, STANDARDS])
    ignore = folder / ".assistantignore"
    ignore.write_text("# drafts\n**/computer-standards.md\n", encoding="utf-8")

    def statuses() -> dict[str, str]:
        rows = cli("ingest", str(folder), data_dir=data_dir)
        return {r["source"]: r["status"] for r in (rows if isinstance(rows, list) else [rows])}

    assert statuses() == {PASSWORDS: "done"}
    ignore.write_text("**/passwords.md\n", encoding="utf-8")  # now the other way round
    assert statuses() == {PASSWORDS: "deleted", STANDARDS: "done"}
    assert sources_found(data_dir, ["How long should my passwords be?"]) == {STANDARDS}

    ignore.write_text("!\n", encoding="utf-8")  # not a pattern: the run refuses and names the file
    get_settings.cache_clear()
    bad = CliRunner().invoke(app, ["ingest", str(folder)], env={"ASSISTANT_DATA_DIR": str(data_dir)})
    assert bad.exit_code == 2 and ".assistantignore" in bad.output


@pytest.fixture(autouse=True)
def _fresh_settings():
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
