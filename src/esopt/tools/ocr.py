"""OCR of a page image into reading-order text lines: RapidOCR (PP-OCR models in ONNX,
shipped inside the `rapidocr` wheel, so no download and no system package).

`python -m esopt.tools.ocr PAGE.png` prints the text. The engine was chosen by
benchmarks/ocr.py (character accuracy and seconds per page on the synthetic pages).
Boxes are grouped into lines by vertical overlap and joined left to right, so a table
row reads as one line ("Stapler  3  $4.50  $13.50").
"""

from __future__ import annotations

import functools
import sys

import numpy as np


@functools.lru_cache(maxsize=1)
def engine(threads: int = 1):
    """The RapidOCR engine (built once per process; ~1.5 s to import and load)."""
    from rapidocr import RapidOCR

    # The page is upright: the angle classifier would only cost time. One ONNX thread:
    # the sandbox runs many tool calls side by side.
    return RapidOCR(params={"Global.use_cls": False, "Global.log_level": "critical",
                            "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                            "EngineConfig.onnxruntime.inter_op_num_threads": 1})


def warm_up() -> None:
    """Build the engine and run it once on a blank image: rapidocr creates its ONNX
    sessions (and touches its model folder) on the first call, not in its constructor; a
    line of text makes both the detector and the recogniser load."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (160, 48), "white")
    ImageDraw.Draw(img).text((8, 8), "warm up", font=ImageFont.load_default(size=24),
                             fill="black")
    engine()(np.asarray(img))


def group_lines(boxes, texts) -> list[str]:
    """Join detected boxes (4 corner points each) into lines, top to bottom."""
    items = []
    for box, text in zip(boxes, texts, strict=True):
        ys, xs = [p[1] for p in box], [p[0] for p in box]
        items.append((min(ys), max(ys), min(xs), str(text)))
    items.sort()
    lines: list[list] = []  # [top, bottom, [(x, text)]]
    for top, bottom, x, text in items:
        if lines:
            ltop, lbottom, cells = lines[-1]
            overlap = min(bottom, lbottom) - max(top, ltop)
            if overlap > 0.5 * min(bottom - top, lbottom - ltop):
                cells.append((x, text))
                lines[-1][0], lines[-1][1] = min(top, ltop), max(bottom, lbottom)
                continue
        lines.append([top, bottom, [(x, text)]])
    return ["  ".join(t for _, t in sorted(cells)) for _, _, cells in lines]


def ocr_text(image) -> str:
    """The text of an image (a path, PNG/JPEG bytes or a PIL image), one line per row."""
    if not isinstance(image, (str, bytes)):  # a PIL image: rapidocr takes bytes or paths
        import io

        buf = io.BytesIO()
        image.save(buf, format="PNG")
        image = buf.getvalue()
    result = engine()(image)
    if result.boxes is None or not result.txts:
        return ""
    return "\n".join(group_lines(result.boxes.tolist(), result.txts))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m esopt.tools.ocr IMAGE", file=sys.stderr)
        return 2
    print(ocr_text(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
