"""The list of setting variables the lean `assistant search` reads (`assistant.cli.setting_names`) is the
settings' own: regenerated, it is unchanged."""

from __future__ import annotations

from pathlib import Path

from assistant.cli import setting_names


def test_the_lean_list_of_setting_names_is_up_to_date():
    assert Path(setting_names.__file__).read_text() == setting_names.generated(), (
        "a setting was added, renamed or removed: run `python -m assistant.cli.setting_names`"
    )
    assert {"ASSISTANT_TOP_K", "ASSISTANT_DATA_DIR", "ASSISTANT_IMAGE"} <= setting_names.NAMES
