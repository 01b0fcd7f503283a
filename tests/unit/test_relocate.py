"""Moving the names of files whose folder moved (a restore into another data folder)."""

from __future__ import annotations

from pathlib import Path

from assistant.core.operations.relocate import Move

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
