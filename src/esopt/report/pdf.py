"""The report PDF: each table and figure on its own page with its caption."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_pdf import PdfPages  # noqa: E402

from esopt.report.registry import PARTS  # noqa: E402

A4_LANDSCAPE = (11.69, 8.27)


def _caption(captions: Path, name: str) -> str:
    path = captions / f"{name}.rst"
    return " ".join(path.read_text().split()) if path.exists() else ""


def _table_page(pdf: PdfPages, title: str, csv_path: Path, caption: str) -> None:
    with open(csv_path) as f:
        rows = list(csv.reader(f))
    fig, ax = plt.subplots(figsize=A4_LANDSCAPE)
    ax.axis("off")
    ax.set_title(title, fontsize=16, loc="left")
    if len(rows) > 1:
        table = ax.table(cellText=rows[1:], colLabels=rows[0], loc="upper center",
                         cellLoc="center")
        table.auto_set_font_size(False)
        table.set_fontsize(10)
        table.auto_set_column_width(list(range(len(rows[0]))))  # fit the longest cell
        table.scale(1, 1.8)
    fig.text(0.06, 0.1, textwrap.fill(caption, 150), fontsize=10, va="bottom")
    pdf.savefig(fig)
    plt.close(fig)


def _figure_page(pdf: PdfPages, title: str, png: Path, caption: str) -> None:
    fig = plt.figure(figsize=A4_LANDSCAPE)
    ax = fig.add_axes([0.03, 0.2, 0.94, 0.7])
    ax.imshow(mpimg.imread(png))
    ax.axis("off")
    fig.suptitle(title, fontsize=16, x=0.06, ha="left")
    fig.text(0.06, 0.08, textwrap.fill(caption, 150), fontsize=10, va="bottom")
    pdf.savefig(fig)
    plt.close(fig)


def _first_page(pdf: PdfPages, page) -> None:
    """What ran and what it shows (esopt.report.summary.FirstPage)."""
    fig = plt.figure(figsize=A4_LANDSCAPE)
    fig.text(0.06, 0.92, "esopt report", fontsize=24, va="top")
    fig.text(0.06, 0.84, textwrap.fill(page.ran, 140), fontsize=10, va="top")
    y = 0.74
    for line in page.headline.splitlines():
        fig.text(0.06, y, textwrap.fill(line, 140), fontsize=11, va="top", weight="bold")
        y -= 0.035 * (1 + len(line) // 140)
    header, rows = page.table
    if rows:
        ax = fig.add_axes([0.04, 0.06, 0.92, max(0.1, y - 0.1)])
        ax.axis("off")
        table = ax.table(cellText=rows, colLabels=header, loc="upper center", cellLoc="center")
        table.auto_set_font_size(False)
        table.set_fontsize(9)
        table.auto_set_column_width(list(range(len(header))))
        table.scale(1, 1.5)
        fig.text(0.06, 0.03, textwrap.fill(
            "Held-out score x100 (success; ANLS for DocVQA); CIs: 95% percentile bootstrap "
            "resampling seeds (clusters) and the held-out tasks they share, repeats averaged "
            "within a task; 'minus base' is paired (same tasks and sampling seeds); * the CI "
            "excludes zero.", 170), fontsize=9)
    pdf.savefig(fig)
    plt.close(fig)


def build_report(tables: str | Path, figures: str | Path, captions: str | Path,
                 out: str | Path, first_page) -> Path:
    """The first page (what ran, what it shows), then a page per table and figure of the
    report parts (esopt.report.registry.PARTS, in its order) that were written, each with
    its caption, in one PDF."""
    tables, figures, captions, out = map(Path, (tables, figures, captions, out))
    out.parent.mkdir(parents=True, exist_ok=True)
    with PdfPages(out) as pdf:
        _first_page(pdf, first_page)
        for artifact in (a for part in PARTS for a in part.artifacts):
            page = artifact.page_file(tables, figures)
            if not page.exists():  # a part the config does not have
                continue
            draw = _table_page if artifact.kind == "table" else _figure_page
            draw(pdf, artifact.title, page, _caption(captions, artifact.caption_stem))
    return out
