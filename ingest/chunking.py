"""Sections to chunks cut with the embedding model's own tokenizer, never longer than its limit.

Markdown is first split on its headings (llama-index `MarkdownNodeParser`), so that a chunk never
straddles two sections and carries its heading path; then llama-index's `SentenceSplitter` packs
sentences (its secondary regex knows Chinese full stops `。？！`) up to the token budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from llama_index.core import Document as LIDocument
from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter

from assistant.core.index.passages import heading_prefix
from ingest.readers import ParsedDocument

# Real text averages 3-5 characters per token in English and 1-2 in Chinese; a chunk with more
# characters per token than this is one the tokenizer failed to see (a long run without spaces).
MAX_CHARS_PER_TOKEN = 12


@dataclass(frozen=True)
class Chunk:
    """One chunk: `text` as shown to readers, `embed_text` as embedded (title and heading first);
    `ocr` when its text was recognised in a scanned page or an image."""

    position: int
    text: str
    embed_text: str
    page: int | None
    heading: str
    ocr: bool = False


class Chunker:
    """Cuts documents into chunks of at most `max_tokens` model tokens (prefix included).

    Args:
        encode: the embedding model's tokenizer, `str -> list[int]` without special tokens.
        max_tokens: the embedding model's limit for text (its max_seq_length minus special tokens).
        chunk_tokens: target chunk size (0 = `max_tokens`).
        overlap_tokens: tokens shared by consecutive chunks of one section.
    """

    def __init__(self, encode: Callable[[str], list[int]], *, max_tokens: int, chunk_tokens: int = 0, overlap_tokens: int = 32):
        self.encode = encode
        self.max_tokens = max_tokens
        self.chunk_tokens = min(chunk_tokens or max_tokens, max_tokens)
        self.overlap_tokens = overlap_tokens
        self._markdown = MarkdownNodeParser(include_metadata=True, include_prev_next_rel=False)
        self._splitters: dict[int, SentenceSplitter] = {}

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def chunk(self, doc: ParsedDocument) -> list[Chunk]:
        """All chunks of `doc`, positions 0..n-1 in reading order."""
        return list(self.iter_chunks(doc))

    def iter_chunks(self, doc: ParsedDocument) -> Iterator[Chunk]:
        """The chunks of `doc` one at a time, positions 0..n-1 in reading order; a streamed document's
        sections (`ParsedDocument.stream`) are read as the chunks are taken, so that only the current
        section and its chunks are held."""
        position = 0
        for text, page, heading, ocr in self._pieces(doc):
            if not text.strip():
                continue
            prefix = heading_prefix(doc.title, heading)
            prefix_tokens = self.count(prefix)
            if prefix_tokens > self.max_tokens // 4:  # absurdly long titles: keep the budget for text
                prefix, prefix_tokens = "", 0
            budget = max(16, self.chunk_tokens - prefix_tokens)
            for piece in self._splitter(budget).split_text(text):
                for part in self._enforce_limit(piece, budget):
                    yield Chunk(position, part, prefix + part, page, heading, ocr)
                    position += 1

    def _pieces(self, doc: ParsedDocument) -> Iterator[tuple[str, int | None, str, bool]]:
        """(text, page, heading, ocr) per section, a Markdown section split on its headings first."""
        for section in doc.all_sections():
            if doc.markdown:
                nodes = self._markdown.get_nodes_from_documents([LIDocument(text=section.text)])
                for node in nodes:
                    heading = _heading_of(node.metadata.get("header_path", ""), node.get_content())
                    yield node.get_content(), section.page, heading, section.ocr
            else:
                yield section.text, section.page, section.heading, section.ocr

    def _splitter(self, budget: int) -> SentenceSplitter:
        # One splitter per budget: building one loads its sentence tokenizer, which a workbook cut
        # into thousands of row groups would otherwise pay thousands of times.
        if budget not in self._splitters:
            self._splitters[budget] = SentenceSplitter(
                chunk_size=budget,
                chunk_overlap=min(self.overlap_tokens, budget // 4),
                tokenizer=self.encode,
                include_metadata=False,
                include_prev_next_rel=False,
            )
        return self._splitters[budget]

    def _enforce_limit(self, text: str, budget: int) -> list[str]:
        # SentenceSplitter can exceed its budget on one unbreakable "sentence" (a long URL, a table
        # row without spaces); halve those (at a space near the middle when there is one) until each
        # part fits, so that nothing is silently truncated by the embedding model. WordPiece turns a
        # word of over 100 characters into one [UNK] token, so a token count alone would let a
        # megabyte without spaces through as one chunk: the character cap catches that.
        if (len(text) <= budget * MAX_CHARS_PER_TOKEN and self.count(text) <= budget) or len(text) < 2:
            return [text] if text.strip() else []
        middle = len(text) // 2
        space = text.rfind(" ", middle // 2, middle + middle // 2)
        cut = space if space > 0 else middle
        return self._enforce_limit(text[:cut], budget) + self._enforce_limit(text[cut:], budget)


def _heading_of(header_path: str, content: str) -> str:
    first = content.lstrip().splitlines()[0] if content.strip() else ""
    own = first.lstrip("#").strip() if first.startswith("#") else ""
    parts = [p for p in header_path.strip("/").split("/") if p]
    if own:
        parts.append(own)
    return " > ".join(parts)
