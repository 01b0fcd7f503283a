"""File formats to sections of text (with page numbers and headings): see `ingest.formats`."""

from ingest.formats import SUPPORTED, Limits, ParsedDocument, Section, parse_file

__all__ = ["SUPPORTED", "Limits", "ParsedDocument", "Section", "parse_file"]
