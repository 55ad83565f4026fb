"""What the server child and its parent agree on (no Flask import: the parent side and
`esopt.envs` must import without the `web` extra)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

EPISODE_HEADER = "X-Esopt-Episode"
"""The request header naming the episode whose database copy a request uses."""
ADMIN_HEADER = "X-Esopt-Admin"
"""The request header carrying the admin key of the reset/release endpoints."""


def episode_db_path(workdir: Path, token: str) -> Path:
    """Where the server keeps episode `token`'s database (read by the checks)."""
    return Path(workdir) / f"ep-{token}.sqlite"


def write_db(schema: str, data: dict[str, list[dict]], path: Path) -> Path:
    """Create the SQLite file `path` from a schema and rows by table."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.executescript(schema)
        for name, rows in data.items():
            for row in rows:
                cols = ", ".join(row)
                marks = ", ".join("?" for _ in row)
                con.execute(f"INSERT INTO {name} ({cols}) VALUES ({marks})", tuple(row.values()))
        con.commit()
    finally:
        con.close()
    return path
