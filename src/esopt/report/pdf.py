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

A4_LANDSCAPE = (11.69, 8.27)
AHD_PAGES = (
    ("table5", "Table 5: constructive heuristic design (test objectives, gap-ratio gains)"),
    ("table13", "Table 13: AHD proposal budgets and ES update units"),
    ("table14", "Table 14: ACO heuristic design (test objectives, EoH / ESOpt + EoH ratios)"),
    ("table17", "Table 17: AHD repeated runs"),
    ("table18", "Table 18: AHD end-to-end runtime"),
)


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
        fig.text(0.06, 0.03, "Success x100 on held-out tasks; CIs: 95% percentile bootstrap "
                 "over tasks; 'minus base' is paired (same tasks and sampling seeds); * the CI "
                 "excludes zero.", fontsize=9)
    pdf.savefig(fig)
    plt.close(fig)


def build_report(tables: str | Path, figures: str | Path, captions: str | Path,
                 out: str | Path, first_page) -> Path:
    """The first page (what ran, what it shows), then Tables 1, 2, 7, Figures 3, 7, the
    training reward, Figure 6 (and the math / DocVQA, web and AHD pages when present), in
    one PDF."""
    tables, figures, captions, out = map(Path, (tables, figures, captions, out))
    out.parent.mkdir(parents=True, exist_ok=True)
    with PdfPages(out) as pdf:
        _first_page(pdf, first_page)
        if (tables / "table1.csv").exists():  # present when the Sudoku experiment ran
            _table_page(pdf, "Table 1: Agentic Sudoku success by H*", tables / "table1.csv",
                        _caption(captions, "table1"))
            _table_page(pdf, "Table 2: training compute and wall time", tables / "table2.csv",
                        _caption(captions, "table2"))
            _table_page(pdf, "Table 7: ES configurations", tables / "table7.csv",
                        _caption(captions, "table7"))
            _figure_page(pdf, "Figure 3: Agentic Sudoku by H*", figures / "fig3.png",
                         _caption(captions, "fig3"))
            _figure_page(pdf, "Figure 7: per-turn success and realized horizon",
                         figures / "fig7.png", _caption(captions, "fig7"))
        if (tables / "table6.csv").exists():  # present when an ES run trained
            _table_page(pdf, "Table 6: distribution of parameter-update magnitudes after ES",
                        tables / "table6.csv", _caption(captions, "table6"))
        if (figures / "train_reward.png").exists():
            _figure_page(pdf, "Training reward of the ES runs (spread over directions)",
                         figures / "train_reward.png", _caption(captions, "train_reward"))
        if (figures / "fig6.png").exists():  # present when landscapes were computed
            _figure_page(pdf, "Figure 6: reward landscapes around the final checkpoint",
                         figures / "fig6.png", _caption(captions, "fig6"))
        if (tables / "table3.csv").exists():  # present when math or DocVQA ran
            _table_page(pdf, "Table 3: math with a tool and DocVQA with an OCR tool",
                        tables / "table3.csv", _caption(captions, "table3"))
            _figure_page(pdf, "Figure 8: best-of-k (math; DocVQA ANLS and accuracy)",
                         figures / "fig8.png", _caption(captions, "fig8"))
        if (figures / "fig9.png").exists():  # present when DocVQA trained runs ran
            _figure_page(pdf, "Figure 9: average realized trajectory length during DocVQA "
                              "training", figures / "fig9.png", _caption(captions, "fig9"))
        if (tables / "table4.csv").exists():  # present when the web experiment ran
            _table_page(pdf, "Table 4: web tasks, success per site category",
                        tables / "table4.csv", _caption(captions, "table4"))
            _figure_page(pdf, "Figure 10: web success during Agentic ESOpt",
                         figures / "fig10.png", _caption(captions, "fig10"))
            _table_page(pdf, "Table 12: web adaptation stages", tables / "table12.csv",
                        _caption(captions, "table12"))
        if (tables / "companions.csv").exists():  # present when companion methods ran
            _table_page(pdf, "Companion ES methods: ES, CoPES, async ES, low-rank ES",
                        tables / "companions.csv", _caption(captions, "companions"))
            _figure_page(pdf, "Companion ES methods: training reward and held-out success",
                         figures / "companions.png", _caption(captions, "companions_fig"))
        for name, title in AHD_PAGES:  # present when the AHD experiment ran
            if (tables / f"{name}.csv").exists():
                _table_page(pdf, title, tables / f"{name}.csv", _caption(captions, name))
    return out
