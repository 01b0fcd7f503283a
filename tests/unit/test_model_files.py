"""Assembly of a chat model from "part" packages: order, size and SHA-256 checks, atomic placement.

The part packages here are small real packages written to a scratch folder and put on sys.path; the
shipped models' own parts are assembled in tests/service/test_builtin_chat_model.py."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from assistant.core.errors import ConfigError
from assistant.core.llm.model_files import (
    BUILTIN_MODELS,
    DEFAULT_MODEL,
    BuiltinModel,
    ModelFileError,
    assemble,
    builtin_model,
    configured_gguf_path,
    part_paths,
)
from assistant.core.settings import Settings

PARTS = [b"GGUF" + bytes(range(256)) * 3, b"second part " * 100, b"the end"]


@pytest.fixture
def parted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BuiltinModel:
    """A model in three part packages `tpart1..3` (each `data/partNN.bin`), installed on sys.path."""
    site = tmp_path / "site"
    for number, data in enumerate(PARTS, start=1):
        package = site / f"tpart{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{number:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(PARTS)
    return BuiltinModel(
        name="tiny", file_name="tiny.gguf", packages=("tpart1", "tpart2", "tpart3"), parts=True,
        size_bytes=len(whole), sha256=hashlib.sha256(whole).hexdigest(), origin="test",
    )


def test_parts_are_concatenated_in_order_and_checked(parted: BuiltinModel, tmp_path: Path):
    path = assemble(parted, tmp_path / "gguf")
    assert path == tmp_path / "gguf" / "tiny.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny.gguf", "tiny.gguf.verified"]
    # A verified, unchanged file is kept as is (not rewritten: same inode, same mtime).
    before = path.stat()
    assert assemble(parted, tmp_path / "gguf").stat().st_mtime_ns == before.st_mtime_ns


def test_a_wrong_checksum_is_refused_and_leaves_nothing(parted: BuiltinModel, tmp_path: Path):
    wrong = replace(parted, sha256="0" * 64)
    with pytest.raises(ModelFileError, match="SHA-256") as error:
        assemble(wrong, tmp_path / "gguf")
    assert "reinstall" in str(error.value) and parted.sha256 in str(error.value)
    assert list((tmp_path / "gguf").iterdir()) == []  # no half-written or unchecked file


def test_parts_in_the_wrong_order_do_not_assemble(parted: BuiltinModel, tmp_path: Path):
    first, second, third = part_paths(parted)
    with pytest.raises(ModelFileError, match="SHA-256"):
        assemble(parted, tmp_path / "gguf", parts=[second, first, third])


def test_a_changed_file_is_assembled_again(parted: BuiltinModel, tmp_path: Path):
    path = assemble(parted, tmp_path / "gguf")
    path.write_bytes(b"damaged")
    assert assemble(parted, tmp_path / "gguf").read_bytes() == b"".join(PARTS)


def test_a_package_with_another_part_is_refused(parted: BuiltinModel, tmp_path: Path):
    swapped = replace(parted, packages=("tpart2", "tpart1", "tpart3"))
    with pytest.raises(ModelFileError, match="should hold data/part01.bin"):
        part_paths(swapped)


def test_a_missing_part_package_names_the_wheel(parted: BuiltinModel):
    with pytest.raises(ModelFileError, match="tpart-missing is not installed"):
        part_paths(replace(parted, packages=("tpart_missing",)))


def test_model_setting_names_a_built_in_model_or_a_file(tmp_path: Path):
    assert Settings.flat_fields()["llm_model"].default == DEFAULT_MODEL
    assert set(Settings.flat_fields()["llm_model"].annotation.__args__) == set(BUILTIN_MODELS)
    gguf = tmp_path / "mine.gguf"
    settings = Settings(_env_file=None, data_dir=tmp_path, llm_model_path=gguf)
    assert configured_gguf_path(settings) == gguf
    with pytest.raises(ConfigError, match="not a built-in chat model"):
        builtin_model("gpt-5")
