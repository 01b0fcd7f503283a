"""Issue 19 figures: OCR pages per second, and the big workbook through the parser process.

OCR: `--pages` A4 pages at 150 dpi (1240x1754), each with 30 lines of mixed English and Chinese
text, recognised one at a time by the default engine (RapidOCR, PP-OCRv6 small, the models of its
wheel) with `--ocr-threads` ONNX Runtime threads; the model load is timed apart.

Workbook: `--sheets` sheets, one of them with `--rows` rows (an asset inventory with a header merged
over two rows), written with openpyxl's write-only mode, then parsed and chunked by the real parser
process (`ingest.isolated_parse`, the same memory and time limits as ingestion) twice on the same
file, in this order: handed over in parts of `PART_CHUNKS` chunks (ingestion's way; each part dropped
once counted, as ingestion drops it once written), then as one message per file (`part_chunks=0`, the
way before parts, the chunks kept as ingestion kept them until the file was written). For each:
seconds, chunks, the largest message in chunks, the parser process's peak resident memory (VmHWM)
and this process's (ru_maxrss: the parts run comes first, so the second figure is the whole-file run's
own peak unless it stayed below the first), and whether a row near the end came out with its header.
The chunks are not embedded here (on 2 cores the embedder, not the parser, sets the pace: see
bench_ingest.py); a sample of `--embed-sample` chunks is embedded to give the embedding rate.

Usage: .venv/bin/python bench/bench_scans_and_sheets.py [--pages 4] [--rows 200000] [--sheets 30]
(`--rows 0`: OCR figures only; `--pages 0`: workbook figures only)
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FONT = "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"
LINES = [
    "Section {n}: the warehouse in Rotterdam is audited every quarter by the facilities team.",
    "第{n}节：仓库盘点每季度进行一次，负责人是物流部的王经理。",
]


def ocr_figures(pages: int, threads: int) -> dict:
    """Seconds to load the engine, and pages/s over `pages` rendered pages."""
    from PIL import Image, ImageDraw, ImageFont

    from ingest.formats.ocr_engines import OcrOptions, get_engine

    font = ImageFont.truetype(FONT, 26)
    images = []
    for p in range(pages):
        image = Image.new("L", (1240, 1754), 255)
        draw = ImageDraw.Draw(image)
        for n in range(30):
            draw.text((90, 90 + 52 * n), LINES[n % 2].format(n=p * 30 + n), font=font, fill=0)
        images.append(image)
    started = time.perf_counter()
    engine = get_engine(OcrOptions(threads=threads))
    engine.recognise(images[0].crop((0, 0, 1240, 200)))  # loads the three models
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    chars = sum(len(engine.recognise(image)) for image in images)
    seconds = time.perf_counter() - started
    return {"load_s": load_s, "pages": pages, "seconds": seconds, "pages_per_s": pages / seconds, "chars": chars}


def write_workbook(path: Path, sheets: int, rows: int) -> None:
    """`sheets` sheets: 'Inventory' with `rows` rows and a two-row merged header, the others 50 rows."""
    from openpyxl import Workbook

    book = Workbook(write_only=True)
    for s in range(sheets):
        sheet = book.create_sheet("Inventory" if s == 0 else f"Site {s}")
        if s == 0:
            sheet.append(["Asset tag", "Location", None, "Owner", "Purchased", "Value (EUR)"])
            sheet.append([None, "Building", "Room", None, None, None])
            for n in range(3, rows + 1):
                sheet.append([f"A-{n:06d}", f"B-{n % 17}", f"R-{n % 400}", f"Employee {n % 997}", f"2024-{n % 12 + 1:02d}-01", n % 5000])
            # A write-only sheet writes its merged ranges after the rows, as Excel does.
            for ref in ("A1:A2", "B1:C1", "D1:D2", "E1:E2", "F1:F2"):
                sheet.merged_cells.add(ref)
        else:
            sheet.append(["Room", "Seats", "Projector"])
            for n in range(50):
                sheet.append([f"{s}.{n}", n % 12, "yes" if n % 2 else "no"])
    book.save(path)


def workbook_figures(path: Path, rows: int, embed_sample: int, part_chunks: int) -> dict:
    """Parse and chunk the workbook in the parser process, handed over in parts of `part_chunks` (0: one
    message): seconds, chunks, largest message, peak RSS of the parser process and of this one."""
    from assistant.core.embedding.embedder import Embedder
    from assistant.core.settings import get_settings
    from ingest.isolated_parse import IsolatedParser

    settings = get_settings()
    embedder = Embedder(settings.embedding.model)
    parser = IsolatedParser(
        tokenizer_path=embedder.path, max_tokens=embedder.max_text_tokens,
        chunk_tokens=settings.ingest.chunk_size_tokens or getattr(embedder, "chunk_tokens", 0),
        overlap_tokens=settings.ingest.chunk_overlap_tokens, timeout_s=3600, memory_limit_bytes=settings.ingest.parse_memory_limit_bytes,
        part_chunks=part_chunks,
    )
    late = f"A-{rows - 50:06d}"
    found, sample, kept = None, [], []
    chunks = largest = 0
    try:
        started = time.perf_counter()
        parser.submit("book", path)
        pid = parser._proc.pid
        while True:
            result = parser.collect()
            chunks += len(result.chunks)
            largest = max(largest, len(result.chunks))
            found = found or next((c for c in result.chunks if late in c.text), None)
            sample = sample or [c.embed_text for c in result.chunks[:embed_sample]]
            if not part_chunks:
                kept = result.chunks  # held until written, as ingestion held a whole file's chunks
            if result.final:
                break
        seconds = time.perf_counter() - started
        with open(f"/proc/{pid}/status") as status:
            hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    finally:
        parser.close()
    figures = {
        "status": result.status, "reason": result.reason, "seconds": seconds, "chunks": chunks,
        "largest_message_chunks": largest, "kept_chunks": len(kept),
        "parser_peak_rss_mb": hwm_kb / 1024,
        "this_process_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "late_row_with_header": bool(found and found.text.startswith("Asset tag | Location Building")),
        "late_row_heading": found.heading if found else "",
    }
    if embed_sample and sample:
        embedder.embed_passages(sample[:8])  # warm-up
        started = time.perf_counter()
        embedder.embed_passages(sample)
        figures["embed_chunks_per_s"] = len(sample) / (time.perf_counter() - started)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--ocr-threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--sheets", type=int, default=30)
    parser.add_argument("--embed-sample", type=int, default=64)
    args = parser.parse_args()
    from ingest.isolated_parse import PART_CHUNKS

    if args.pages > 0:
        ocr = ocr_figures(args.pages, args.ocr_threads)
        print(f"OCR: engine load {ocr['load_s']:.1f} s; {ocr['pages']} pages in {ocr['seconds']:.1f} s = "
              f"{ocr['pages_per_s']:.2f} pages/s ({ocr['chars']} characters)", flush=True)
    if args.rows <= 0:
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "inventory.xlsx"
        started = time.perf_counter()
        write_workbook(path, args.sheets, args.rows)
        print(f"workbook: {args.sheets} sheets, {args.rows:,} rows, {path.stat().st_size / 1e6:.1f} MB, "
              f"written in {time.perf_counter() - started:.1f} s", flush=True)
        runs = {f"parts of {PART_CHUNKS}": workbook_figures(path, args.rows, args.embed_sample, PART_CHUNKS)}
        runs["one message per file"] = workbook_figures(path, args.rows, 0, 0)
    names = list(runs)
    print(f"| figure | {' | '.join(names)} |\n|---|{'---|' * len(names)}")
    for key in runs[names[0]]:
        cells = [runs[n].get(key, "") for n in names]
        print(f"| {key} | " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in cells) + " |")


if __name__ == "__main__":
    main()
