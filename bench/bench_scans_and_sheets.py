"""Issue 19 figures: OCR pages per second, and the big workbook through the parser process.

OCR: `--pages` A4 pages at 150 dpi (1240x1754), each with 30 lines of mixed English and Chinese
text, recognised one at a time by the default engine (RapidOCR, PP-OCRv6 small, the models of its
wheel) with `--ocr-threads` ONNX Runtime threads; the model load is timed apart.

Workbook: `--sheets` sheets, one of them with `--rows` rows (an asset inventory with a header merged
over two rows), written with openpyxl's write-only mode, then parsed and chunked by the real parser
process (`ingest.isolated_parse`, the same memory and time limits as ingestion): seconds, chunks, the
parser process's peak resident memory (VmHWM), and whether a row near the end came out with its header.
The chunks are not embedded here (on 2 cores the embedder, not the parser, sets the pace: see
bench_ingest.py); a sample of `--embed-sample` chunks is embedded to give the embedding rate.

Usage: .venv/bin/python bench/bench_scans_and_sheets.py [--pages 4] [--rows 200000] [--sheets 30]
(`--rows 0`: OCR figures only)
"""

from __future__ import annotations

import argparse
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


def workbook_figures(path: Path, rows: int, embed_sample: int) -> dict:
    """Parse and chunk the workbook in the parser process: seconds, chunks, peak RSS of that process."""
    from assistant.core.embedder import Embedder
    from assistant.core.settings import get_settings
    from ingest.isolated_parse import IsolatedParser

    settings = get_settings()
    embedder = Embedder(settings.embedding_model)
    parser = IsolatedParser(
        tokenizer_path=embedder.path, max_tokens=embedder.max_text_tokens,
        chunk_tokens=settings.chunk_size_tokens or getattr(embedder, "chunk_tokens", 0),
        overlap_tokens=settings.chunk_overlap_tokens, timeout_s=3600, memory_limit_bytes=settings.parse_memory_limit_bytes,
    )
    try:
        started = time.perf_counter()
        parser.submit("book", path)
        pid = parser._proc.pid
        result = parser.collect()
        seconds = time.perf_counter() - started
        with open(f"/proc/{pid}/status") as status:
            hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    finally:
        parser.close()
    late = f"A-{rows - 50:06d}"
    found = [c for c in result.chunks if late in c.text]
    figures = {
        "status": result.status, "reason": result.reason, "seconds": seconds, "chunks": len(result.chunks),
        "parser_peak_rss_mb": hwm_kb / 1024,
        "late_row_with_header": bool(found and found[0].text.startswith("Asset tag | Location Building")),
        "late_row_heading": found[0].heading if found else "",
    }
    if embed_sample and result.chunks:
        sample = [c.embed_text for c in result.chunks[:embed_sample]]
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
        book = workbook_figures(path, args.rows, args.embed_sample)
    print("| figure | value |\n|---|---|")
    for key, value in book.items():
        print(f"| {key} | {value:.2f} |" if isinstance(value, float) else f"| {key} | {value} |")


if __name__ == "__main__":
    main()
