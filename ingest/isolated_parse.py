"""Parse and chunk files in a child process that is killed when it runs past its time or memory limit.

A parser that hangs (a pathological PDF, a regex on hostile input) or balloons (a decompression bomb)
must fail its own file, not the batch: the child runs `parse_file` and the chunker under RLIMIT_AS,
the parent waits for each answer at most `timeout_s` and kills the child's whole process group
(LibreOffice or tesseract helpers included) when it does not come, then starts a fresh one.

The child is a plain `python -m ingest.isolated_parse` subprocess (not `multiprocessing`), because a
Celery prefork worker is a daemonic process that may not have `multiprocessing` children. Frames on
its stdin/stdout are a 4-byte big-endian length and a pickle. Besides results, the child sends a
`Progress` frame after each page it recognises by OCR: each one restarts the file's time limit (a
scanned book takes longer than any one file should, and each page has its own OCR limit), and the
parent passes it to its `on_progress` callback.

Chunks are handed over in parts of at most `part_chunks`: a `ParseResult` with status `part` for
each full part as soon as it is cut, then the final result (`done` with the last chunks, or the
failure) that ends the file. The child reads a table format's rows as it chunks them, and it blocks
on the pipe while the parent embeds, so neither process holds more than a few parts of a workbook
of any length. Each part restarts the file's time limit, as an OCR page does. A caller must treat
a file's parts as provisional until its final result: a failure after some parts (a cell limit
reached at row 900,000, the process killed) means the file failed as a whole. The child's stderr (library warnings such as pypdf's
"fontTools is required", OCR engine logs) goes to `log_path`, not to the user's terminal.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from assistant.core.errors import IngestError
from ingest.chunking import Chunk, Chunker

_HEADER = struct.Struct(">I")
_READY = "ready"
PART = "part"  # the status of a ParseResult that carries some of a file's chunks, more to come
PART_CHUNKS = 256  # chunks per part: about 0.4 MB of text, and half of one embedding batch
START_TIMEOUT_S = 180.0  # imports (llama-index, transformers) take seconds on a loaded 2-core box


@dataclass
class ParseResult:
    """What the child made of one file.

    Attributes:
        key: the caller's key of the request.
        status: `done`, or the failure status (`failed`, `unsupported`, `too_large`, `encrypted`,
            `needs_ocr`, `empty`), or `part` (`PART`): some of the file's chunks, more to come.
        reason: why it failed, naming the file; when done, the document's notes (pages
            recognised by OCR, rows left out past a limit), else empty.
        title / mime / page_count: the document's metadata (when done).
        chunks: the chunks in reading order (when done: those after the parts sent before; a part:
            its own, positions counting on from the part before).
        attachments: (file name, bytes) of files carried inside this one.
        parse_s: seconds the child spent parsing and chunking.
        tables_file: when done, the scratch duckdb file holding the document's large sheets as
            tables (`assistant.tables.files.install` moves it into place), or None.
    """

    key: Any
    status: str
    reason: str = ""
    title: str = ""
    mime: str = ""
    page_count: int | None = None
    chunks: list[Chunk] = field(default_factory=list)
    attachments: list[tuple[str, bytes]] = field(default_factory=list)
    parse_s: float = 0.0
    tables_file: str | None = None
    fatal: bool = False  # the child ran out of memory and exits: a fresh one takes the next file

    @property
    def final(self) -> bool:
        """Whether this ends its file (any status but `part`)."""
        return self.status != PART


@dataclass(frozen=True)
class Progress:
    """The child is still working on the oldest request: `pages` pages done, `recognised` with text."""

    pages: int
    recognised: int


@dataclass
class _Request:
    key: Any
    path: str
    name: str
    started: float = 0.0  # when the child began on it (as far as the parent can tell)


class IsolatedParser:
    """A parse-and-chunk child process with a per-file time limit and an address-space limit.

    Requests are answered in submission order; several may be outstanding so that the child parses
    the next file while the caller embeds the previous ones.

    Args:
        tokenizer_path: local folder of the embedding model (its tokenizer cuts the chunks).
        max_tokens: the embedding model's text limit in tokens (special tokens excluded).
        chunk_tokens: target chunk size in tokens (0 = `max_tokens`).
        overlap_tokens: tokens shared by consecutive chunks of one section.
        timeout_s: seconds one file may take (parse + chunk) before the child is killed.
        memory_limit_bytes: address space the child may add beyond its start-up size (RLIMIT_AS).
        log_path: file the child's stderr is appended to (None: inherited).
        on_progress: called with (request key, `Progress`) as OCR pages are done.
        part_chunks: most chunks per part handed over before a file's final result; 0: every
            chunk of a file in its final result (the whole file held in both processes).
        tables_dir: the tables folder (`Settings.tables_dir`): large sheets are loaded into a
            scratch file under it (`ParseResult.tables_file`); None: every sheet as row groups.
    """

    def __init__(
        self,
        *,
        tokenizer_path: Path,
        max_tokens: int,
        chunk_tokens: int,
        overlap_tokens: int,
        timeout_s: float,
        memory_limit_bytes: int,
        log_path: Path | None = None,
        on_progress: Callable[[Any, Progress], None] | None = None,
        part_chunks: int = PART_CHUNKS,
        tables_dir: Path | None = None,
    ):
        self.config = {
            "tables_dir": str(tables_dir) if tables_dir is not None else None,
            "tokenizer_path": str(tokenizer_path),
            "max_tokens": max_tokens,
            "chunk_tokens": chunk_tokens,
            "overlap_tokens": overlap_tokens,
            "memory_limit_bytes": memory_limit_bytes,
            "part_chunks": part_chunks,
        }
        self.timeout_s = timeout_s
        self.memory_limit_bytes = memory_limit_bytes
        self.log_path = log_path
        self.on_progress = on_progress
        self._proc: subprocess.Popen | None = None
        self._queue: collections.deque[_Request] = collections.deque()

    @property
    def pending(self) -> int:
        """Requests submitted and not yet collected."""
        return len(self._queue)

    def submit(self, key: Any, path: Path, *, name: str | None = None) -> None:
        """Queue `path` for parsing; `key` comes back in its `ParseResult`.

        Args:
            key: any picklable value identifying the request.
            path: the file to parse.
            name: the name used in messages (default: the file name).
        """
        request = _Request(key, str(path), name or Path(path).name)
        self._ensure_child()
        if not self._queue:
            request.started = time.monotonic()
        self._queue.append(request)
        self._send(request)

    def collect(self) -> ParseResult:
        """The next result of the oldest outstanding request, waiting at most `timeout_s` for it: a
        part of its chunks (`status` `part`; the request stays outstanding) or its final result.

        A child that does not answer in time is killed (result `failed`, "parse timed out after N s");
        one that dies (e.g. killed by the kernel) fails that request alone; either way a fresh child
        takes over the remaining requests.

        Raises:
            IndexError: nothing is outstanding.
        """
        head = self._queue[0]
        if not head.started:
            head.started = time.monotonic()
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            remaining = head.started + self.timeout_s - time.monotonic()
            ready, _, _ = select.select([self._proc.stdout], [], [], max(0.0, remaining))
            if not ready:
                self._restart_without_head()
                return ParseResult(head.key, "failed", f"{head.name}: parse timed out after {self.timeout_s:g} s")
            try:
                result = _read_frame(self._proc.stdout)
            except EOFError:
                code = self._proc.wait()
                self._restart_without_head()
                how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
                return ParseResult(head.key, "failed", f"{head.name}: the parser process {how}")
            if not isinstance(result, Progress):
                break
            head.started = time.monotonic()  # a page done: the limit counts from here
            if self.on_progress is not None:
                self.on_progress(head.key, result)
        result.key = head.key
        if not result.final:
            head.started = time.monotonic()  # a part done: the limit counts from here
            return result
        if result.fatal:
            self._restart_without_head()
        else:
            self._queue.popleft()
            if self._queue:
                self._queue[0].started = time.monotonic()
        return result

    def close(self) -> None:
        """Stop the child (outstanding requests are dropped)."""
        self._queue.clear()
        self._kill()

    # -- the child process ---------------------------------------------------------------------
    def _ensure_child(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
        log = None
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log_path, "ab")
        # A session of its own: the whole group (with any converter it started) dies on a timeout.
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ingest.isolated_parse"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True,
                bufsize=0,  # unbuffered: a frame read ahead into a buffer would be invisible to select()
            )
        finally:
            if log is not None:
                log.close()  # the child holds its own copy
        _write_frame(self._proc.stdin, self.config)
        ready, _, _ = select.select([self._proc.stdout], [], [], START_TIMEOUT_S)
        if not ready or _read_frame(self._proc.stdout) != _READY:
            self._kill()
            raise RuntimeError(f"the parser process did not start within {START_TIMEOUT_S:g} s")

    def _send(self, request: _Request) -> None:
        assert self._proc is not None
        _write_frame(self._proc.stdin, (request.path, request.name))

    def _restart_without_head(self) -> None:
        self._kill()
        self._queue.popleft()
        rest = list(self._queue)
        if rest:
            self._ensure_child()
            rest[0].started = time.monotonic()
            for request in rest:
                self._send(request)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def __del__(self) -> None:  # a forgotten parser must not leave a process behind
        try:
            self._kill()
        except Exception:
            pass


def _write_frame(stream: BinaryIO, obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEADER.pack(len(payload)) + payload)
    while data:  # a raw (unbuffered) pipe may take part of a large frame per call
        written = stream.write(data)
        data = data[written or 0 :]
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    parts, left = [], n
    while left:
        part = stream.read(left)
        if not part:
            raise EOFError("the stream ended inside a frame")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _read_frame(stream: BinaryIO) -> Any:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return pickle.loads(_read_exact(stream, size))


def _child_main() -> None:
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    config = _read_frame(inp)

    # Only the child parses, after stdout is redirected (a library that prints on import cannot break the
    # frames); a process that starts the child never loads transformers (~2 s) or the readers (~1 s).
    import transformers  # noqa: PLC0415 - see above
    from transformers import AutoTokenizer  # noqa: PLC0415 - see above

    from assistant.tables.files import discard, staging_file  # noqa: PLC0415 - see above
    from ingest.formats.limits import Limits  # noqa: PLC0415 - see above
    from ingest.formats.ocr import set_page_listener  # noqa: PLC0415 - see above
    from ingest.readers import parse_file  # noqa: PLC0415 - see above

    # Library warnings (pypdf's "fontTools is required", bad fonts) are kept in the log (stderr).
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    set_page_listener(lambda page, recognised: _write_frame(out, Progress(page, recognised)))

    # Counting the tokens of long texts (to cut chunks) is expected; the length warning is noise.
    transformers.logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(config["tokenizer_path"], local_files_only=True)
    chunker = Chunker(
        lambda t: tokenizer.encode(t, add_special_tokens=False),
        max_tokens=config["max_tokens"],
        chunk_tokens=config["chunk_tokens"],
        overlap_tokens=config["overlap_tokens"],
    )
    _warm_up(parse_file, chunker)
    limit = config["memory_limit_bytes"]
    with open("/proc/self/statm") as statm:
        start_size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (start_size + limit, start_size + limit))
    _write_frame(out, _READY)
    tables_dir = config.get("tables_dir")
    for n in itertools.count():
        try:
            path, name = _read_frame(inp)
        except EOFError:  # the parent is gone
            return
        started = time.perf_counter()
        staged = staging_file(Path(tables_dir), f"{os.getpid()}-{n}") if tables_dir else None
        try:
            parsed = parse_file(Path(path), limits=replace(Limits.from_settings(), tables_path=staged), streamed=True)
            chunks, sent = [], 0
            for chunk in chunker.iter_chunks(parsed):
                chunks.append(chunk)
                if len(chunks) == config["part_chunks"]:
                    _write_frame(out, ParseResult(None, PART, title=parsed.title, mime=parsed.mime, chunks=chunks))
                    chunks, sent = [], sent + len(chunks)
            if not chunks and not sent:
                raise IngestError(f"{name}: no text found", status="empty", attachments=list(parsed.attachments or []))
            result = ParseResult(
                None, "done", "; ".join(parsed.notes), parsed.title, parsed.mime, parsed.page_count, chunks,
                list(getattr(parsed, "attachments", None) or []),
                tables_file=str(staged) if staged is not None and staged.exists() else None,
            )
        except IngestError as exc:
            result = ParseResult(None, exc.status, exc.message, attachments=list(exc.attachments))
        except MemoryError:
            # The heap may stay fragmented or half-full: report, then let a fresh process go on.
            result = ParseResult(
                None, "failed", f"{name}: parsing needed more than the memory limit of {limit:,} bytes", fatal=True
            )
        except Exception as exc:  # a parser bug fails this file only
            result = ParseResult(None, "failed", f"{name}: {type(exc).__name__}: {exc}")
        result.parse_s = time.perf_counter() - started
        if result.tables_file is None:
            discard(staged)  # a failed parse's tables never replace the document's
        try:
            _write_frame(out, result)
        except MemoryError:
            result = ParseResult(None, "failed", f"{name}: the parsed text exceeds the memory limit of {limit:,} bytes", fatal=True)
            _write_frame(out, result)
        if result.fatal:
            return


def _warm_up(parse_file, chunker) -> None:
    # Readers and splitters import and build things on first use (threads included); doing that
    # before the address-space limit is set keeps the limit for what a file itself needs.
    # Long enough to be cut at sentence boundaries, which loads nltk's punkt on first use.
    text = "A sentence of some words, to be split. Another one follows it here! " * 200
    samples = {"a.md": f"# Title\n\n{text}\n", "a.html": f"<html><body><p>{text}</p></body></html>", "a.txt": text}
    with tempfile.TemporaryDirectory() as folder:
        for name, text in samples.items():
            path = Path(folder) / name
            path.write_text(text)
            try:
                chunker.chunk(parse_file(path))
            except Exception:  # a warm-up only
                pass


if __name__ == "__main__":
    # Run from the imported module, so that results pickle as `ingest.isolated_parse.ParseResult`.
    from ingest.isolated_parse import _child_main as main

    main()
