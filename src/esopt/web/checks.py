"""Judge an episode by its task's checks (pure functions; the db check reads a SQLite file,
program_html reads a page through the `page_text` callable, fuzzy_match asks `judge`)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from esopt.web.task import Check, Task

Judge = Callable[[str, str, tuple[str, ...]], bool]
"""judge(intent, answer, references) -> whether the answer means the reference (WebArena's
fuzzy_match, an LLM there); supplied by the user for real WebArena tasks."""


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


def includes(text: str, reference: str) -> bool:
    """Whether normalized `text` contains the reference as a whole token run (any one
    alternative of "a |OR| b")."""
    got = normalize(text)
    return any(re.search(rf"(?<![\w.]){re.escape(normalize(alt))}(?![\w])", got)
               for alt in reference.split(" |OR| "))


def passes(check: Check, answer: str | None, url: str, db_path: Path | None = None, *,
           page_text: Callable[[str], str | None] | None = None, judge: Judge | None = None,
           intent: str = "") -> bool:
    """Whether the episode (its stop answer, its last URL, its database, a page after it)
    passes the check. Without what a check needs (a database, a page reader, a judge) it
    fails: never a silent pass."""
    if check.kind == "exact_match":
        return answer is not None and normalize(answer) in {normalize(r) for r in check.reference}
    if check.kind == "must_include":
        return answer is not None and all(includes(answer, r) for r in check.reference)
    if check.kind == "url_match":
        return url_matches(url, check.reference[0])
    if check.kind == "fuzzy_match":
        return answer is not None and judge is not None and bool(
            judge(intent, answer, check.reference))
    if check.kind == "program_html":
        text = page_text(check.url or url) if page_text is not None else None
        if text is None:
            return False
        if check.exact:
            return normalize(text) in {normalize(r) for r in check.reference}
        return all(includes(text, r) for r in check.reference)
    if db_path is None or not Path(db_path).exists():
        return False
    return query_db(db_path, check.sql, check.params) == check.expected


def task_passes(task: Task, answer: str | None, url: str, db_path: Path | None = None, *,
                page_text: Callable[[str], str | None] | None = None,
                judge: Judge | None = None) -> bool:
    """Whether every check of the task passes."""
    return all(passes(c, answer, url, db_path, page_text=page_text, judge=judge,
                      intent=task.intent) for c in task.checks)
