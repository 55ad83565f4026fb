"""Judge an episode by its task's check (pure functions; the db check reads a SQLite file)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from esopt.web.task import Check


def normalize(text: str) -> str:
    """Lower case, single spaces, without surrounding quotes or a final period."""
    text = " ".join((text or "").split()).lower()
    return text.strip("\"'` ").rstrip(".").strip()


def url_matches(url: str, reference: str) -> bool:
    """Same path, and every query parameter of the reference present with its value."""
    got, ref = urlsplit(url or ""), urlsplit(reference)
    if got.path.rstrip("/") != ref.path.rstrip("/"):
        return False
    params = dict(parse_qsl(got.query))
    return all(normalize(params.get(k, "")) == normalize(v) for k, v in parse_qsl(ref.query))


def query_db(path: Path, sql: str, params: tuple = ()) -> tuple[tuple, ...]:
    """The rows of a read-only query on a database file."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return tuple(tuple(r) for r in con.execute(sql, params).fetchall())
    finally:
        con.close()


def passes(check: Check, answer: str | None, url: str, db_path: Path | None = None) -> bool:
    """Whether the episode (its stop answer, its last URL, its database) passes the check."""
    if check.kind == "exact_match":
        return answer is not None and normalize(answer) in {normalize(r) for r in check.reference}
    if check.kind == "must_include":
        got = normalize(answer or "")
        return answer is not None and all(
            re.search(rf"(?<![\w.]){re.escape(normalize(r))}(?![\w])", got)
            for r in check.reference)
    if check.kind == "url_match":
        return url_matches(url, check.reference[0])
    if db_path is None or not Path(db_path).exists():
        return False
    return query_db(db_path, check.sql, check.params) == check.expected
