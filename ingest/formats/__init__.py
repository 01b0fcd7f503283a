"""File formats to sections of text: one reader module per family, `parse_file` picks among them."""

from ingest.formats.dispatch import SUPPORTED, parse_file
from ingest.formats.document import ParsedDocument, Section
from ingest.formats.limits import Limits

__all__ = ["SUPPORTED", "Limits", "ParsedDocument", "Section", "parse_file"]
