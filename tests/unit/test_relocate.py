"""The folders of files a backup takes, and moving their names when a restore puts them elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.core.errors import ConfigError
from assistant.operations.backup import data_folders
from assistant.operations.relocate import Move
from tests.conftest import make_settings

MOVE = Move(Path("/srv/old data/uploads"), Path("/var/lib/assistant/uploads"))


def test_paths_and_uris_under_the_old_folder_move_and_others_stay():
    file = Path("/srv/old data/uploads/1f2e/Q3 plan.docx")
    assert MOVE.path(str(file)) == "/var/lib/assistant/uploads/1f2e/Q3 plan.docx"
    assert MOVE.uri(file.as_uri()) == Path("/var/lib/assistant/uploads/1f2e/Q3 plan.docx").as_uri()
    # An attachment's URI keeps its `#name`; the folder itself moves too.
    assert MOVE.uri(file.as_uri() + "#photo%20one.png") == Path("/var/lib/assistant/uploads/1f2e/Q3 plan.docx").as_uri() + "#photo%20one.png"
    assert MOVE.uri(Path("/srv/old data/uploads").as_uri()) == Path("/var/lib/assistant/uploads").as_uri()
    # A sibling whose name starts alike, and a file elsewhere, are not under the folder.
    assert MOVE.path("/srv/old data/uploads-archive/a.md") is None
    assert MOVE.uri(Path("/srv/old data/uploads-archive/a.md").as_uri()) is None
    assert MOVE.uri(Path("/shares/handbook/a.md").as_uri()) is None


def test_the_backed_up_folders_follow_the_settings_and_never_hold_the_data_folder(tmp_path: Path):
    data = tmp_path / "var"
    folders = data_folders(make_settings(data, uploads_dir=tmp_path / "shared" / "uploads"))
    assert folders == {"uploads": (tmp_path / "shared" / "uploads").resolve(),
                       "helpdesk-resolutions": (data / "helpdesk-resolutions").resolve(),
                       "finetune": (data / "finetune").resolve(), "adapters": (data / "adapters").resolve(),
                       "tables": (data / "tables").resolve()}
    with pytest.raises(ConfigError, match="the uploads folder .* is the data folder .* or holds it"):
        data_folders(make_settings(data, uploads_dir=tmp_path))
