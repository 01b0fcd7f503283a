"""`assistant serve-model` builds the vLLM command from deploy/vllm profiles; the bench script's dry run."""

from __future__ import annotations

import importlib.util
import json
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
    assert config["served-model-name"] == Settings.flat_fields()["openai_model"].default
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


def test_bench_summary_tabulates_vllm_result_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location("bench_serve", PROFILES_DIR / "bench_serve.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_serve", bench)  # its dataclass looks itself up there
    spec.loader.exec_module(bench)
    result = {  # the keys `vllm bench serve --save-result --metric-percentiles 50,90,99` writes
        "max_concurrency": 16, "completed": 128, "request_throughput": 3.31, "output_throughput": 832.0,
        "total_token_throughput": 14144.0, "p50_ttft_ms": 180.5, "p99_ttft_ms": 950.0,
        "p50_tpot_ms": 21.0, "p99_tpot_ms": 35.5, "p99_itl_ms": 80.26, "p50_e2el_ms": 5600.0,
    }
    (tmp_path / "rag-c16.json").write_text(json.dumps(result))
    summary = bench.write_summary(
        tmp_path, ["rag-c16", "rag-c32"], profile_name="h100", kv_tokens=142_000
    ).read_text()
    row = "| rag-c16 | 16 | 128 | 3.3 | 832.0 | 14144.0 | 180.5 | 950.0 | 21.0 | 35.5 | 80.3 | 5600.0 |"
    assert row in summary.splitlines()
    assert "rag-c32" not in summary, "a run that wrote no result has no row"
    assert "142000 tokens = 17.3 sequences of 8,192 tokens" in summary
