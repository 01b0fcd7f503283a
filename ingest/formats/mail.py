"""E-mail messages (EML, Outlook MSG) to headers and body text; attachments handed back as files."""

from __future__ import annotations

import email
import email.errors
import email.header
import email.policy
import re
from email.message import Message
from pathlib import Path

from assistant.core.errors import IngestError
from ingest.decoding import decode_text, looks_binary
from ingest.formats.document import ParsedDocument, Section, finish
from ingest.formats.html import html_sections

EML_MIME = "message/rfc822"
MSG_MIME = "application/vnd.ms-outlook"
_CID = re.compile(rb"cid:([^\"'>\s]+)", re.I)
_HEADERS = ("From", "To", "Cc", "Date", "Subject")
_ENCRYPTED_TYPES = {"multipart/encrypted", "application/pkcs7-mime", "application/x-pkcs7-mime", "application/pgp-encrypted"}


def read_eml(path: Path) -> ParsedDocument:
    """Parse an RFC 822 message.

    The file itself may be stored in UTF-16 (it is decoded first); parts are decoded with their
    declared charset, falling back to detection; the text/plain alternative is preferred over HTML.
    Parts with a file name that are not the body (attachments, not inline images) become
    `attachments` for the caller to ingest on their own.

    Args:
        path: the file.

    Returns:
        A 'headers' section (From, To, Cc, Date, Subject) and the body; the subject as title.

    Raises:
        IngestError: `encrypted` (S/MIME or PGP body), `empty` (no headers and no body).
    """
    data = path.read_bytes()
    if b"\x00" in data[:4096] and not looks_binary(data[:4096]):  # the whole file saved as UTF-16/32
        message = email.message_from_string(decode_text(data, name=path.name), policy=email.policy.compat32)
    else:
        message = email.message_from_bytes(data, policy=email.policy.compat32)
    if any(part.get_content_type() in _ENCRYPTED_TYPES for part in message.walk()):
        raise IngestError(f"{path.name}: the message body is encrypted (S/MIME or PGP)", status="encrypted")
    headers = _header_lines({h: _header(message, h) for h in _HEADERS})
    body, attachments = _body_and_attachments(message, path.name)
    sections = [Section(headers, heading="Headers")] if headers else []
    sections += body
    subject = _header(message, "Subject")
    doc = ParsedDocument(title=subject or path.stem, mime=EML_MIME, sections=sections, attachments=attachments)
    return finish(doc, name=path.name)


def read_msg(path: Path) -> ParsedDocument:
    """Parse an Outlook .msg message with extract-msg (same shape as `read_eml`).

    Args:
        path: the file.

    Returns:
        A 'Headers' section and the body (plain text, else HTML); attachments with their bytes.

    Raises:
        IngestError: `failed` (not a readable .msg), `encrypted` (a signed/encrypted message), `empty`.
    """
    import extract_msg
    from extract_msg.exceptions import ExMsgBaseException

    try:
        message = extract_msg.openMsg(str(path), delayAttachments=False)
    except (ExMsgBaseException, OSError, ValueError, KeyError) as exc:
        raise IngestError(f"{path.name}: the Outlook message cannot be read ({type(exc).__name__}: {exc})") from exc
    try:
        if not hasattr(message, "body"):  # a .msg holding a contact, task or appointment
            raise IngestError(f"{path.name}: an Outlook item that is not an e-mail message", status="unsupported")
        fields = {"From": message.sender, "To": message.to, "Cc": message.cc, "Date": str(message.date or ""), "Subject": message.subject}
        headers = _header_lines({k: " ".join(str(v or "").split()) for k, v in fields.items()})
        sections = [Section(headers, heading="Headers")] if headers else []
        body = message.body or ""
        if body.strip():
            sections.append(Section(body.replace("\r\n", "\n").strip()))
        elif message.htmlBody:
            sections += html_sections(decode_text(message.htmlBody, name=path.name))[1]
        attachments = []
        for attachment in message.attachments:
            data = getattr(attachment, "data", None)
            if isinstance(data, bytes) and data:
                attachments.append((attachment.getFilename() or "attachment", data))
        title = (message.subject or "").strip() or path.stem
    finally:
        message.close()
    return finish(ParsedDocument(title=title, mime=MSG_MIME, sections=sections, attachments=attachments), name=path.name)


def _header(message: Message, name: str) -> str:
    value = message.get(name)
    if value is None:
        return ""
    try:
        decoded = email.header.make_header(email.header.decode_header(str(value)))
        return " ".join(str(decoded).split())
    except (UnicodeDecodeError, LookupError, email.errors.HeaderParseError):
        return " ".join(str(value).split())


def _header_lines(values: dict[str, str]) -> str:
    return "\n".join(f"{name}: {value}" for name, value in values.items() if value)


def _body_and_attachments(message: Message, name: str) -> tuple[list[Section], list[tuple[str, bytes]]]:
    plain: list[str] = []
    html: list[str] = []
    attachments: list[tuple[str, bytes]] = []
    referenced = _cid_references(message)
    for part in message.walk():
        if part.is_multipart():
            continue
        filename = part.get_filename()
        disposition = (part.get_content_disposition() or "").lower()
        content_type = part.get_content_type()
        if disposition == "attachment" or (filename and not content_type.startswith("text/")):
            payload = part.get_payload(decode=True)
            content_id = (part.get("Content-ID") or "").strip().strip("<>")
            if disposition == "attachment" and payload and content_id not in referenced:
                attachments.append((_decoded_filename(filename) or "attachment", payload))
            continue  # inline images are pictures in the body, not text
        if content_type in ("text/plain", "text/html"):
            text = _part_text(part, name)
            (plain if content_type == "text/plain" else html).append(text)
    if any(t.strip() for t in plain):
        return [Section("\n\n".join(t.replace("\r\n", "\n").strip() for t in plain if t.strip()))], attachments
    sections = [s for markup in html for s in html_sections(markup)[1]]
    return sections, attachments


def _cid_references(message: Message) -> set[str]:
    """Content-IDs that an HTML part shows inline ('cid:...'): pictures of the body, not attachments."""
    found: set[str] = set()
    for part in message.walk():
        if part.get_content_type() == "text/html":
            payload = part.get_payload(decode=True) or b""
            found |= {m.decode("latin-1") for m in _CID.findall(payload)}
    return found


def _part_text(part: Message, name: str) -> str:
    payload = part.get_payload(decode=True)
    if payload is None:  # a malformed part whose payload is already text
        payload = str(part.get_payload()).encode("utf-8", errors="surrogateescape")
    try:
        return decode_text(payload, name=name, declared=part.get_content_charset())
    except IngestError:  # one undecodable part must not lose the rest of the message
        return ""


def _decoded_filename(filename: str | None) -> str:
    if not filename:
        return ""
    try:
        return str(email.header.make_header(email.header.decode_header(filename)))
    except (UnicodeDecodeError, LookupError, email.errors.HeaderParseError):
        return filename
