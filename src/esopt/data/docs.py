"""Document VQA tasks: seeded synthetic pages (PIL), or the Hub's DocVQA by dataset id.

A task is one page image (encoded bytes), one question and its gold answers (a list: DocVQA
accepts any of them). `synthetic:COUNT:SEED` renders invoices, forms, receipts and letters
with key-value fields, a small item table, dates and totals, so tests and the tiny scale
need no network; the `short` layout keeps SHORT_FIELDS of a page's labelled fields (no
table) and asks for one of them, whose answer is the value printed after its label (the
tiny scale's held-out family: SmolLM2-135M can copy it, it cannot read the full pages);
`lmms-lab/DocVQA` (needs `datasets` and network) maps the Hub's fields to the same records.
"""

from __future__ import annotations

import functools
import io
import random
import re
from dataclasses import dataclass

# The Hub's DocVQA: its validation split has answers (its test split does not).
HUB_ID = "lmms-lab/DocVQA"
HUB_CONFIG = "DocVQA"


@dataclass(frozen=True)
class DocTask:
    id: str
    image: bytes  # encoded: PNG (synthetic pages) or the Hub's own JPEG
    question: str
    answers: tuple[str, ...]
    doc_type: str = ""
    label: str = ""  # synthetic pages: the printed label the question asks about
    kind: str = ""  # synthetic pages: "field" or the table column ("qty", "amount")


_FIRST = ("Maria", "James", "Aiko", "Oluwaseun", "Chen", "Sofia", "Lars", "Priya", "Diego",
          "Hannah", "Omar", "Elena", "Tomas", "Grace", "Ravi", "Nora")
_LAST = ("Keller", "Okafor", "Tanaka", "Novak", "Lindqvist", "Moreau", "Patel", "Romero",
         "Fischer", "Brennan", "Haddad", "Costa", "Ivanova", "Walsh", "Nguyen", "Berg")
_COMPANY = ("Northwind Traders", "Bluebell Foods", "Acme Hardware", "Orion Logistics",
            "Maple Office Supply", "Harbor Electric", "Summit Printing", "Cedar Labs",
            "Riverside Bakery", "Vertex Tools", "Greenfield Farms", "Atlas Freight")
_ITEMS = ("Copy paper", "Toner cartridge", "Desk lamp", "USB cable", "Stapler", "Notebook",
          "Coffee beans", "Water filter", "Safety gloves", "Label tape", "Monitor stand",
          "Paint brush", "Extension cord", "Printer ink", "Folder set", "Hand soap")
_CITIES = ("Springfield", "Riverton", "Lakeside", "Fairview", "Greenville", "Oakdale",
           "Brookfield", "Milton", "Ashford", "Kingston")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_STREETS = ("Main Street", "Oak Avenue", "Park Road", "Elm Street", "Hill Lane", "Bay Road")


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _date(rng: random.Random) -> tuple[str, list[str]]:
    """A date as printed, and the forms an answer may take."""
    y, m, d = rng.randint(2015, 2025), rng.randint(1, 12), rng.randint(1, 28)
    printed = rng.choice([f"{_MONTHS[m - 1]} {d}, {y}", f"{d:02d}/{m:02d}/{y}",
                          f"{y}-{m:02d}-{d:02d}"])
    return printed, [printed]


def _money(x: float) -> tuple[str, list[str]]:
    """`$1,234.50` as printed; `1,234.50` and `1234.50` are accepted answers too."""
    plain = f"{x:,.2f}"
    return f"${plain}", [f"${plain}", plain, f"{x:.2f}"]


def _table(rng: random.Random, rows: int):
    items = rng.sample(_ITEMS, rows)
    out = []
    for item in items:
        qty, price = rng.randint(1, 24), rng.randint(150, 9999) / 100
        out.append((item, qty, price, round(qty * price, 2)))
    return out


def _layout(doc_type: str, rng: random.Random) -> tuple[str, list, list, str]:
    """(title, [(label, value, answers)], table rows, closing text) of one document."""
    company, client = rng.choice(_COMPANY), _name(rng)
    date, date_answers = _date(rng)
    if doc_type == "invoice":
        rows = _table(rng, rng.randint(2, 4))
        number = f"INV-{rng.randint(1000, 99999)}"
        fields = [("Invoice No", number, [number]), ("Date", date, date_answers),
                  ("Bill To", client, [client]),
                  ("Due Date", *_date(rng)), ("Vendor", company, [company])]
        return "INVOICE", fields, rows, "Thank you for your business."
    if doc_type == "receipt":
        rows = _table(rng, rng.randint(2, 3))
        number = f"{rng.randint(100000, 999999)}"
        cashier = _name(rng)
        fields = [("Store", company, [company]), ("Receipt No", number, [number]),
                  ("Date", date, date_answers), ("Cashier", cashier, [cashier])]
        return "RECEIPT", fields, rows, "Please keep this receipt for returns."
    if doc_type == "form":
        phone = f"({rng.randint(200, 989)}) {rng.randint(200, 989)}-{rng.randint(1000, 9999)}"
        address = f"{rng.randint(1, 999)} {rng.choice(_STREETS)}, {rng.choice(_CITIES)}"
        member = f"M{rng.randint(10000, 99999)}"
        fields = [("Name", client, [client]), ("Date of Birth", *_date(rng)),
                  ("Phone", phone, [phone]), ("Address", address, [address]),
                  ("Member ID", member, [member]), ("Signed On", date, date_answers)]
        return "REGISTRATION FORM", fields, [], "I confirm the information above is correct."
    # letter
    ref = f"REF/{rng.randint(100, 999)}/{rng.randint(10, 99)}"
    amount, amount_answers = _money(rng.randint(10000, 500000) / 100)
    fields = [("Date", date, date_answers), ("To", client, [client]),
              ("From", company, [company]), ("Reference", ref, [ref]),
              ("Amount Due", amount, amount_answers)]
    body = "Please find enclosed our statement for the period."
    return "LETTER", fields, [], body


@functools.lru_cache(maxsize=4)
def _font(size: int):
    from PIL import ImageFont

    return ImageFont.load_default(size=size)  # Pillow's embedded font: same on every machine


LAYOUTS = ("full", "short")
SHORT_FIELDS = 3
"""Labelled fields on a `short` page (chosen by measurement, issue 37: 135M's base success)."""


def _page(doc_type: str, rng: random.Random, layout: str) -> tuple[str, list, list, str]:
    """_layout's document, cut to SHORT_FIELDS of its fields (in page order, no table) for
    the short layout; the full page draws nothing more from `rng`, so it stays as before."""
    title, fields, rows, closing = _layout(doc_type, rng)
    if layout == "short":
        keep = sorted(rng.sample(range(len(fields)), SHORT_FIELDS))
        fields, rows = [fields[i] for i in keep], []
    return title, fields, rows, closing


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def render_page(doc_type: str, rng: random.Random, layout: str = "full"
                ) -> tuple[bytes, list, list]:
    """Render one page; return (PNG bytes, fields, table rows)."""
    from PIL import Image, ImageDraw

    title, fields, rows, closing = _page(doc_type, rng, layout)
    width, height = 900, 1000
    img = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(img)
    big, body = _font(34), _font(22)
    x, y = 60, 50
    draw.text((x, y), title, font=big, fill=0)
    y += 80
    for label, value, _ in fields:
        draw.text((x, y), f"{label}: {value}", font=body, fill=0)
        y += 40
    if rows:
        y += 20
        cols = (x, x + 320, x + 430, x + 600)
        for cx, head in zip(cols, ("Item", "Qty", "Unit Price", "Amount"), strict=True):
            draw.text((cx, y), head, font=body, fill=0)
        y += 34
        draw.line((x, y, width - 60, y), fill=0, width=2)
        y += 10
        for item, qty, price, amount in rows:
            cells = (item, str(qty), _money(price)[0], _money(amount)[0])
            for cx, cell in zip(cols, cells, strict=True):
                draw.text((cx, y), cell, font=body, fill=0)
            y += 36
        draw.line((x, y, width - 60, y), fill=0, width=2)
        y += 14
        total = round(sum(r[3] for r in rows), 2)
        draw.text((cols[2], y), f"Total: {_money(total)[0]}", font=body, fill=0)
        y += 40
    draw.text((x, y + 30), closing, font=body, fill=0)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue(), fields, rows


DOC_TYPES = ("invoice", "receipt", "form", "letter")


def _questions(fields, rows) -> list[tuple[str, list[str], str, str]]:
    """(question, answers, label, kind) candidates for one page."""
    qs = [(f"What is the {label}?" if label not in ("To", "From") else
           f"Who is the letter {label.lower()}?", answers, label, "field")
          for label, _, answers in fields]
    for item, qty, _, amount in rows:
        qs.append((f"What is the quantity of {item}?", [str(qty)], item, "qty"))
        qs.append((f"What is the amount for {item}?", _money(amount)[1], item, "amount"))
    if rows:
        qs.append(("What is the Total?", _money(round(sum(r[3] for r in rows), 2))[1],
                   "Total", "field"))
    return qs


def synthetic_tasks(count: int, seed: int = 0, layout: str = "full") -> list[DocTask]:
    """`count` tasks, one page each, a deterministic function of (count index, seed,
    layout)."""
    _check_layout(layout)
    prefix = "syn" if layout == "full" else f"syn-{layout}"
    out = []
    for i in range(count):
        rng = random.Random(f"docvqa-synthetic/{seed}/{i}")
        doc_type = DOC_TYPES[rng.randrange(len(DOC_TYPES))]
        png, fields, rows = render_page(doc_type, rng, layout)
        question, answers, label, kind = rng.choice(_questions(fields, rows))
        out.append(DocTask(f"{prefix}{seed}:{i}", png, question,
                           tuple(dict.fromkeys(answers)), doc_type, label, kind))
    return out


def page_text(task_seed: int, seed: int = 0, layout: str = "full") -> str:
    """The exact text printed on synthetic page `task_seed` (OCR accuracy's reference)."""
    _check_layout(layout)
    rng = random.Random(f"docvqa-synthetic/{seed}/{task_seed}")
    doc_type = DOC_TYPES[rng.randrange(len(DOC_TYPES))]
    title, fields, rows, closing = _page(doc_type, rng, layout)
    lines = [title] + [f"{label}: {value}" for label, value, _ in fields]
    if rows:
        lines.append("Item Qty Unit Price Amount")
        lines += [f"{it} {q} {_money(p)[0]} {_money(a)[0]}" for it, q, p, a in rows]
        lines.append(f"Total: {_money(round(sum(r[3] for r in rows), 2))[0]}")
    return "\n".join(lines + [closing])


# --- the Hub's DocVQA -------------------------------------------------------------------


def _image_bytes(image) -> bytes:
    """Encoded bytes of a Hub image field: {"bytes": ...} or raw bytes are kept as they
    are (a DocVQA scan is a ~0.2 MB JPEG; as PNG it would be ~4 MB in memory), a decoded
    PIL image is saved as PNG."""
    if isinstance(image, dict):
        if image.get("bytes"):
            return bytes(image["bytes"])
        with open(image["path"], "rb") as f:
            return f.read()
    if isinstance(image, (bytes, bytearray)):
        return bytes(image)
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def image_name(data: bytes) -> str:
    """The file name a page gets in the sandbox: page.jpg for a JPEG, else page.png."""
    return "page.jpg" if data[:3] == b"\xff\xd8\xff" else "page.png"


def from_hub_records(records, source: str = HUB_ID) -> list[DocTask]:
    """DocTasks from DocVQA records (`questionId`, `question`, `answers`, `image`, ...)."""
    out = []
    for i, r in enumerate(records):
        missing = [k for k in ("question", "answers", "image") if k not in r]
        if missing:
            raise ValueError(f"{source} record {i}: needs {missing}, has {sorted(r)}")
        answers = r["answers"]
        answers = (answers,) if isinstance(answers, str) else tuple(str(a) for a in answers)
        if not answers:
            raise ValueError(f"{source} record {i}: no gold answers (a test split?)")
        qid = r.get("questionId", r.get("question_id", i))
        out.append(DocTask(f"docvqa:{qid}", _image_bytes(r["image"]), str(r["question"]).strip(),
                           answers, str(r.get("ucsf_document_id", ""))))
    return out


def load_hub(dataset_id: str = HUB_ID, split: str = "validation", limit: int | None = None,
             seed: int = 0) -> list[DocTask]:
    """The Hub's DocVQA by id (network; `pip install datasets`), optionally `limit` of it,
    a seeded sample."""
    try:
        import datasets
    except ImportError as e:
        raise RuntimeError("loading a dataset id needs `pip install datasets`") from e
    ds = datasets.load_dataset(dataset_id, HUB_CONFIG if dataset_id == HUB_ID else None,
                               split=split)
    if hasattr(ds, "cast_column"):  # the encoded bytes, not a decoded (and re-encoded) image
        ds = ds.cast_column("image", datasets.Image(decode=False))
    index = list(range(len(ds)))
    if limit is not None and limit < len(index):
        index = sorted(random.Random(seed).sample(index, limit))
    return from_hub_records((ds[i] for i in index), source=dataset_id)


# ID[:SPLIT[:LIMIT]]; SPLIT may carry `datasets`' slice, validation[:50] or validation[50:],
# whose colon is not a separator: disjoint slices of one split keep training records out of
# the evaluation.
_HUB_SOURCE = re.compile(r"(?P<id>[^:\[\]]+)(?::(?P<split>[^:\[\]]*(?:\[[^\]]*\])?)"
                         r"(?::(?P<limit>\d*))?)?")


def load_docs(source: str, layout: str = "full") -> list[DocTask]:
    """`synthetic:COUNT:SEED` (pages of `layout`), or a dataset id with an optional
    `:SPLIT:LIMIT` (SPLIT may be sliced: `lmms-lab/DocVQA:validation[50:]`)."""
    _check_layout(layout)
    if source.startswith("synthetic:"):
        _, count, seed = (source.split(":") + ["0"])[:3]
        return synthetic_tasks(int(count), int(seed), layout)
    if layout != "full":
        raise ValueError(f"layout {layout!r} is for synthetic pages; {source!r} is a dataset "
                         "id (its scans have their own layout)")
    return load_hub(*hub_source(source))


def hub_source(source: str) -> tuple[str, str, int | None]:
    """(dataset id, split, limit) of `ID[:SPLIT[:LIMIT]]`; the split defaults to validation."""
    match = _HUB_SOURCE.fullmatch(source)
    if match is None:
        raise ValueError(f"DocVQA source {source!r}: expected synthetic:COUNT:SEED or "
                         "DATASET_ID[:SPLIT[:LIMIT]], e.g. lmms-lab/DocVQA:validation[50:]:200")
    limit = match["limit"]
    return match["id"], match["split"] or "validation", int(limit) if limit else None
