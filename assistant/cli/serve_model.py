"""`assistant serve-model --profile h100|h200 [--dry-run]`: start vLLM from a profile in deploy/vllm/.

A profile is a vLLM config file (`vllm serve --config FILE` reads it as is, which is what compose.yaml
does); this command spells it out as explicit flags so that an operator sees, and can copy, the exact
command line. Flags after the options go to vLLM unchanged (`... --dry-run --port 8001`).
"""

from __future__ import annotations

import enum
import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import typer
import yaml

from assistant.core.errors import ConfigError

PROFILES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "vllm"


class Profile(enum.StrEnum):
    """The GPU a profile is sized for (see deploy/vllm/README.md for the memory arithmetic)."""

    h100 = "h100"
    h200 = "h200"


def load_profile(profile: Profile | str, profiles_dir: Path = PROFILES_DIR) -> dict[str, Any]:
    """Read `<profiles_dir>/<profile>.yaml`.

    Args:
        profile: `h100` or `h200`.
        profiles_dir: folder of the profile files.

    Returns:
        The vLLM options, keyed by long flag name without dashes (`max-model-len`), in file order.

    Raises:
        ConfigError: the file is missing, is not a YAML mapping, or has no `model`.
    """
    name = profile.value if isinstance(profile, Profile) else profile
    path = profiles_dir / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"vLLM profile {name!r}: {path} does not exist")
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict) or not config.get("model"):
        raise ConfigError(f"vLLM profile {path} must be a YAML mapping with a 'model' key")
    return config


def build_command(config: dict[str, Any], extra_args: list[str] | None = None) -> list[str]:
    """The `vllm serve MODEL --flag value ...` argument vector for a profile.

    `true` becomes a bare flag, `false` its `--no-` form, a list repeats its values after one flag,
    a mapping becomes JSON (vLLM's JSON options such as `--default-chat-template-kwargs`).

    Args:
        config: the profile, as `load_profile` returns it.
        extra_args: arguments appended verbatim (vLLM takes the last value of a repeated flag).

    Returns:
        argv, starting with `vllm`.
    """
    argv = ["vllm", "serve", str(config["model"])]
    for key, value in config.items():
        if key == "model" or value is None:
            continue
        if value is True:
            argv.append(f"--{key}")
        elif value is False:
            argv.append(f"--no-{key}")
        elif isinstance(value, list):
            argv += [f"--{key}", *(str(v) for v in value)]
        elif isinstance(value, dict):
            argv += [f"--{key}", json.dumps(value)]
        else:
            argv += [f"--{key}", str(value)]
    return argv + list(extra_args or [])


def serve_model(
    ctx: typer.Context,
    profile: Profile = typer.Option(..., "--profile", help="GPU the vLLM profile is sized for"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the command instead of running it"),
    profiles_dir: Path | None = typer.Option(
        None, "--profiles-dir", help="folder of the profile files (default: deploy/vllm of this checkout)"
    ),
) -> None:
    """Serve the production model with vLLM, configured by deploy/vllm/PROFILE.yaml.

    With --dry-run, print the shell-quoted command on stdout and exit 0. Otherwise this process is
    replaced by vLLM (exec), so that signals and the exit status are vLLM's own.

    Raises:
        typer.Exit: code 2 when the profile is invalid or `vllm` is not installed here.
    """
    try:
        config = load_profile(profile, profiles_dir or PROFILES_DIR)
    except ConfigError as exc:
        typer.echo(f"error ({exc.code}): {exc.message}", err=True)
        raise typer.Exit(code=2) from None
    argv = build_command(config, ctx.args)
    if dry_run:
        typer.echo(shlex.join(argv))
        return
    executable = shutil.which(argv[0])
    if executable is None:
        typer.echo(
            "error: `vllm` is not installed on this machine; run this on the GPU server "
            "(or use the vllm service of compose.yaml), or add --dry-run to see the command",
            err=True,
        )
        raise typer.Exit(code=2)
    os.execv(executable, argv)


def register(app: typer.Typer) -> None:
    """Add `serve-model` to the CLI `app` (unknown flags pass through to vLLM).

    Args:
        app: the main Typer application.
    """
    app.command(
        "serve-model",
        help="Serve the production model with vLLM, configured by deploy/vllm/PROFILE.yaml.",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(serve_model)
