"""Legacy binary Office files (OLE2 containers): encryption checks and conversion with LibreOffice headless."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from assistant.core.errors import IngestError

OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_CONVERT_TIMEOUT_S = 180
# Debian packages that give `soffice` the Writer and Impress import filters, without the desktop (about 270 MB
# installed: docs/notes/serving-and-ingestion-investigations.md, "LibreOffice"); the set-up leaves them to the
# operator.
LIBREOFFICE_PACKAGES = "libreoffice-writer-nogui libreoffice-impress-nogui"


def is_ole2(head: bytes) -> bool:
    """Tell an OLE2 compound file (legacy Office, Outlook, encrypted OOXML) by its signature.

    Args:
        head: the file's first bytes (8 suffice).

    Returns:
        True for the OLE2 signature D0 CF 11 E0 A1 B1 1A E1.
    """
    return head.startswith(OLE2_MAGIC)


def ole_encrypted(path: Path) -> bool:
    """True when an OLE2 file is a password-protected Office document.

    An encrypted DOCX/XLSX/PPTX is not a zip at all but an OLE2 container with an
    `EncryptedPackage` stream ([MS-OFFCRYPTO] 2.3.4.4); legacy .doc/.xls/.ppt carry a flag that
    msoffcrypto-tool reads.

    Args:
        path: an OLE2 file.

    Returns:
        True when a password is needed; False when not, or when the container is not Office's.
    """
    import msoffcrypto
    import olefile

    try:
        with olefile.OleFileIO(str(path)) as ole:
            if ole.exists("EncryptedPackage"):
                return True
    except (OSError, ValueError):
        return False
    try:
        with path.open("rb") as handle:
            return bool(msoffcrypto.OfficeFile(handle).is_encrypted())
    except Exception:  # noqa: BLE001 - msoffcrypto raises plain Exception for formats it does not know
        return False


def soffice_path() -> str | None:
    """Find LibreOffice.

    Returns:
        The path of 'soffice' (or 'libreoffice') on PATH, or None when it is not installed.
    """
    return shutil.which("soffice") or shutil.which("libreoffice")


@contextmanager
def converted(path: Path, target: str) -> Iterator[Path]:
    """Convert a legacy file with LibreOffice headless; yield the converted file, removed afterwards.

    Args:
        path: the legacy file (.doc, .ppt, ...).
        target: the extension to convert to, e.g. 'docx'.

    Yields:
        The converted file in a temporary folder.

    Raises:
        IngestError(status="unsupported"): LibreOffice is not installed.
        IngestError(status="failed"): the conversion failed or timed out.
    """
    command = soffice_path()
    if command is None:
        raise IngestError(
            f"{path.name}: the legacy '{path.suffix.lower()}' format is read by converting it with LibreOffice, which "
            "is not installed on the server ('soffice' is not on PATH): install it (Debian: apt-get install "
            f"--no-install-recommends {LIBREOFFICE_PACKAGES}) and sync again, or save the file as .{target} and "
            "ingest that",
            status="unsupported",
        )
    with tempfile.TemporaryDirectory(prefix="assistant-convert-") as tmp:
        out = Path(tmp)
        # A private profile folder: parallel conversions must not fight over the user's profile lock.
        profile = (out / "profile").as_uri()
        args = [command, f"-env:UserInstallation={profile}", "--headless", "--norestore",
                "--convert-to", target, "--outdir", str(out), str(path)]
        try:
            subprocess.run(args, capture_output=True, timeout=_CONVERT_TIMEOUT_S, check=True)
        except (subprocess.SubprocessError, OSError) as exc:
            raise IngestError(f"{path.name}: LibreOffice could not convert the file to {target} ({exc})") from exc
        result = out / f"{path.stem}.{target}"
        if not result.is_file():
            raise IngestError(f"{path.name}: LibreOffice produced no {target} file")
        yield result
