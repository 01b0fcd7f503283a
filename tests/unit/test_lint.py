"""`make lint`'s static checks, run the same way: ruff over the tree and mypy (strict) over the kernel,
both configured in pyproject.toml. Import direction is tests/unit/test_import_contracts.py's."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=REPO, capture_output=True, text=True)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", "--no-cache", "assistant", "ingest", "finetune", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing_in_core(tmp_path):
    # A cache of its own: a fresh check (about 3 minutes on 2 busy cores), never another run's results.
    result = _run("mypy", "--cache-dir", str(tmp_path / "mypy_cache"), "assistant/core")
    assert result.returncode == 0, result.stdout + result.stderr
