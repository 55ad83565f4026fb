"""What every site shares: HTML helpers, the seeded database file, per-episode copies.

Episodes run concurrently against one server (an ES generation plays G directions x tasks
in lockstep), so each episode gets its own copy of the pristine database, chosen by the
`X-Esopt-Episode` request header; `POST /__reset` (loopback, admin key) re-copies it.
Requests without the header use the copy named "default".
"""

from __future__ import annotations

import hmac
import html
import re
import shutil
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

from flask import Flask, abort, g, request

from esopt.web.protocol import ADMIN_HEADER, EPISODE_HEADER, episode_db_path

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_EPISODE_COPIES = 512
"""Older copies are deleted beyond this (a copy is tens of KB; episodes are short)."""


def esc(value) -> str:
    """HTML-escaped text of any value."""
    return html.escape(str(value), quote=True)


def link(href: str, text) -> str:
    """An anchor."""
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A table; cells are HTML already (escape text with `esc`)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def text_input(name: str, label: str, value="", kind: str = "text") -> str:
    """A labelled single-line input."""
    return (f'<label for="{esc(name)}">{esc(label)}</label>'
            f'<input type="{kind}" id="{esc(name)}" name="{esc(name)}" value="{esc(value)}">')


def text_area(name: str, label: str, value="") -> str:
    """A labelled multi-line input."""
    return (f'<label for="{esc(name)}">{esc(label)}</label>'
            f'<textarea id="{esc(name)}" name="{esc(name)}">{esc(value)}</textarea>')


def select(name: str, label: str, options: list[tuple[str, str]], selected: str = "") -> str:
    """A labelled drop-down of (value, text) options."""
    opts = "".join(f'<option value="{esc(v)}"{" selected" if v == selected else ""}>'
                   f"{esc(t)}</option>" for v, t in options)
    return (f'<label for="{esc(name)}">{esc(label)}</label>'
            f'<select id="{esc(name)}" name="{esc(name)}">{opts}</select>')


def form(action: str, fields: str, submit: str, method: str = "post") -> str:
    """A form with one submit button."""
    return (f'<form action="{esc(action)}" method="{method}">{fields}'
            f'<button type="submit">{esc(submit)}</button></form>')


def page(site: str, title: str, body: str, nav: list[tuple[str, str]]) -> str:
    """A whole page: the site's navigation, a heading, the body."""
    links = " ".join(link(h, t) for h, t in nav)
    return (f"<!doctype html><html><head><title>{esc(title)} | {esc(site)}</title></head>"
            f"<body><nav>{links}</nav><main><h1>{esc(title)}</h1>{body}</main></body></html>")


class EpisodeStore:
    """Per-episode copies of the pristine database under one directory. Beyond
    MAX_EPISODE_COPIES the least recently used copy goes, never one a request holds open."""

    def __init__(self, pristine: Path, workdir: Path):
        self.pristine, self.workdir = Path(pristine), Path(workdir)
        self._lock = threading.Lock()
        self._copies: OrderedDict[str, Path] = OrderedDict()
        self._in_use: dict[str, int] = {}

    def path(self, token: str) -> Path:
        """The episode's database file (copied from the pristine one on first use)."""
        with self._lock:
            if token not in self._copies:
                return self._copy(token)
            self._copies.move_to_end(token)
            return self._copies[token]

    def open(self, token: str) -> Path:
        """Like path(), and the copy is held (not evicted) until close(token)."""
        with self._lock:
            self._in_use[token] = self._in_use.get(token, 0) + 1
        return self.path(token)

    def close(self, token: str) -> None:
        with self._lock:
            left = self._in_use.get(token, 0) - 1
            if left > 0:
                self._in_use[token] = left
            else:
                self._in_use.pop(token, None)

    def reset(self, token: str) -> Path:
        """Re-copy the pristine database for the episode."""
        with self._lock:
            return self._copy(token)

    def release(self, token: str) -> None:
        """Delete the episode's copy."""
        with self._lock:
            p = self._copies.pop(token, None)
            if p is not None:
                p.unlink(missing_ok=True)

    def _copy(self, token: str) -> Path:
        dst = episode_db_path(self.workdir, token)
        shutil.copyfile(self.pristine, dst)
        self._copies[token] = dst
        self._copies.move_to_end(token)
        idle = [t for t in self._copies if t not in self._in_use and t != token]
        for old in idle[:max(0, len(self._copies) - MAX_EPISODE_COPIES)]:
            self._copies.pop(old).unlink(missing_ok=True)
        return dst


def create_base_app(name: str, store: EpisodeStore, admin_key: str) -> Flask:
    """A Flask app with the per-request episode database and the admin endpoints."""
    app = Flask(name)
    app.config["store"] = store

    def token() -> str:
        t = request.headers.get(EPISODE_HEADER, "default")
        if not _TOKEN.match(t):
            abort(400)
        return t

    def admin_only() -> str:
        # The sites bind to loopback already; the key keeps the agent's own browser (which
        # shares the loopback) away from the admin endpoints.
        given = request.headers.get(ADMIN_HEADER, "")
        if request.remote_addr != "127.0.0.1" or not hmac.compare_digest(given, admin_key):
            abort(403)
        return token()

    @app.post("/__reset")
    def reset():
        store.reset(admin_only())
        return "ok"

    @app.post("/__release")
    def release():
        store.release(admin_only())
        return "ok"

    @app.get("/__health")
    def health():
        return "ok"

    @app.teardown_appcontext
    def close_db(_exc):
        con = g.pop("db", None)
        if con is not None:
            con.close()
            store.close(g.pop("db_token"))

    app.config["episode_token"] = token
    return app


def db() -> sqlite3.Connection:
    """The current request's episode database."""
    from flask import current_app

    if "db" not in g:
        store: EpisodeStore = current_app.config["store"]
        token = current_app.config["episode_token"]()
        path = store.open(token)
        try:
            con = sqlite3.connect(path, timeout=10)
        except sqlite3.Error:
            store.close(token)
            raise
        con.row_factory = sqlite3.Row
        g.db, g.db_token = con, token
    return g.db


MAX_PAGE = 100_000


def like_pattern(q: str) -> str:
    """A LIKE pattern matching `q` anywhere, its own % and _ literal (use ESCAPE '\\')."""
    return "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def page_number(arg) -> int:
    """A 1-based page number from a query argument, clamped to [1, MAX_PAGE]."""
    return min(MAX_PAGE, max(1, arg if isinstance(arg, int) else 1))


def rows(sql: str, *params) -> list[sqlite3.Row]:
    """All rows of a query on the episode database."""
    return db().execute(sql, params).fetchall()


def one(sql: str, *params) -> sqlite3.Row:
    """The one row of a query, or 404."""
    row = db().execute(sql, params).fetchone()
    if row is None:
        abort(404)
    return row


def commit(sql: str, *params) -> None:
    """Run one write and commit it."""
    con = db()
    con.execute(sql, params)
    con.commit()
