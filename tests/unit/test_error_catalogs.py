"""Every error code the API can answer with has a human message in both of the web app's catalogs."""

from __future__ import annotations

import re
from pathlib import Path

from assistant.api.errors import HTTP_ERROR_CODES

REPO = Path(__file__).resolve().parents[2]
_CODE = re.compile(r"""\bcode\s*=\s*"([a-z_]+)\"""")


def _codes() -> set[str]:
    codes = set(HTTP_ERROR_CODES.values()) | {"http_error"}
    for folder in ("assistant", "ingest"):
        for path in (REPO / folder).rglob("*.py"):
            codes |= set(_CODE.findall(path.read_text(encoding="utf-8")))
    return codes


def test_every_api_error_code_has_an_english_and_a_chinese_message():
    codes = _codes()
    assert {"not_found", "audience_forbidden", "upload_busy", "csrf_failed"} <= codes
    for catalog in ("en", "zh"):
        text = (REPO / "web" / "src" / "locales" / f"{catalog}.js").read_text(encoding="utf-8")
        keys = set(re.findall(r'^\s*"error\.([a-z_]+)":', text, re.MULTILINE))
        assert codes <= keys, f"{catalog}.js lacks messages for {sorted(codes - keys)}"
