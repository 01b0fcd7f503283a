"""`assistant serve-model` builds the vLLM command from deploy/vllm profiles; the bench script's dry run."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from assistant.cli.serve_model import PROFILES_DIR, build_command, load_profile, register
from assistant.core.settings import Settings

REQUIRED_FLAGS = [
    "--max-model-len", "--gpu-memory-utilization", "--enable-lora", "--max-loras", "--max-lora-rank",
    "--enable-prefix-caching", "--enable-chunked-prefill", "--served-model-name",
]


def _after(argv: list[str], flag: str) -> str:
    """The value that follows `flag` in `argv`."""
    return argv[argv.index(flag) + 1]


def _cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:  # a group, as in the real CLI, so that `serve-model` is a subcommand
        pass

    register(app)
    return app


@pytest.mark.parametrize("profile", ["h100", "h200"])
def test_dry_run_prints_the_vllm_command_with_every_flag(profile):
    result = CliRunner().invoke(_cli(), ["serve-model", "--profile", profile, "--dry-run"])
    assert result.exit_code == 0, result.output
    argv = shlex.split(result.stdout.strip())
    assert argv[:2] == ["vllm", "serve"]
    assert "FP8" in argv[2].upper()
    for flag in REQUIRED_FLAGS:
        assert flag in argv, flag
    config = load_profile(profile)
    assert _after(argv, "--max-lora-rank") == str(config["max-lora-rank"])
    assert _after(argv, "--max-model-len") == str(config["max-model-len"])


def test_extra_flags_pass_through_to_vllm():
    result = CliRunner().invoke(_cli(), ["serve-model", "--profile", "h100", "--dry-run", "--port", "8001"])
    assert result.exit_code == 0, result.output
    assert shlex.split(result.stdout.strip())[-2:] == ["--port", "8001"]


def test_unknown_profile_file_fails_with_its_path(tmp_path: Path):
    result = CliRunner().invoke(
        _cli(), ["serve-model", "--profile", "h100", "--dry-run", "--profiles-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert str(tmp_path / "h100.yaml") in result.output


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, ["--flag"]),
        (False, ["--no-flag"]),
        (8192, ["--flag", "8192"]),
        (0.9, ["--flag", "0.9"]),
        (["a", "b"], ["--flag", "a", "b"]),
        ({"enable_thinking": False}, ["--flag", '{"enable_thinking": false}']),
        (None, []),
    ],
)
def test_build_command_spells_each_yaml_type(value, expected):
    assert build_command({"model": "m", "flag": value}) == ["vllm", "serve", "m", *expected]


@pytest.mark.parametrize("profile", ["h100", "h200"])
def test_profiles_serve_the_name_the_backend_requests(profile):
    """`vllm serve --config` reads the same file: every key must be a long flag name, and the served
    name must be the one ASSISTANT_OPENAI_MODEL asks for by default."""
    config = yaml.safe_load((PROFILES_DIR / f"{profile}.yaml").read_text())
    assert all(key == key.lower() and "_" not in key for key in config)
    assert config["served-model-name"] == Settings.model_fields["openai_model"].default
    assert 0 < config["gpu-memory-utilization"] < 1


def test_bench_dry_run_prints_rag_shaped_commands(tmp_path: Path):
    script = PROFILES_DIR / "bench_serve.py"
    done = subprocess.run(
        [sys.executable, str(script), "--profile", "h100", "--dry-run", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=True,
    )
    commands = [shlex.split(line) for line in done.stdout.splitlines()]
    assert commands and all(c[:3] == ["vllm", "bench", "serve"] for c in commands)
    for c in commands:
        assert _after(c, "--dataset-name") == "random"
        assert _after(c, "--result-dir") == str(tmp_path / "out")
        assert "--save-result" in c
    prefixes = [int(_after(c, "--random-prefix-len")) for c in commands]
    assert prefixes[0] >= 1024 and prefixes[-1] == 0, "a shared-prefix sweep, then a baseline without"
    assert max(int(_after(c, "--max-concurrency")) for c in commands) == load_profile("h100")["max-num-seqs"]
    inputs = {int(_after(c, "--random-prefix-len")) + int(_after(c, "--random-input-len")) for c in commands}
    assert inputs == {4096}, "~4k-token contexts throughout"
    assert not (tmp_path / "out").exists(), "a dry run writes nothing"
