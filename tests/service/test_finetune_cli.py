"""`assistant finetune`: a dry run records a dataset snapshot that export-dataset copies; list, show and
rollback read and change the registry, with exit status 2 and the reason when nothing can change."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from assistant.cli.main import app
from assistant.core.settings import get_settings


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSISTANT_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("ASSISTANT_FINETUNE_SCHEDULE_ENABLED", "false")
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_dry_run_export_list_and_rollback(cli_env):
    runner = CliRunner()
    result = runner.invoke(app, ["finetune", "run", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)
    assert run["status"] == "done" and run["adapter"] is None and run["snapshot"]["counts"]["rows"] == 0
    target = cli_env / "export.jsonl"
    result = runner.invoke(app, ["finetune", "export-dataset", str(run["snapshot"]["id"]), "--to", str(target)])
    assert result.exit_code == 0 and target.read_text() == ""
    assert json.loads(runner.invoke(app, ["finetune", "list", "--json"]).stdout) == []
    result = runner.invoke(app, ["finetune", "rollback"])
    assert result.exit_code == 2 and "nothing to roll back" in result.output
    result = runner.invoke(app, ["finetune", "run", "--audience", "user:alice"])
    assert result.exit_code == 2 and "group:NAME" in result.output
