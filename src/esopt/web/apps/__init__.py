"""The sites' Flask apps (imported only by the server child: Flask is the `web` extra)."""

from __future__ import annotations

import importlib

from esopt.web.sites import SITES


def create_app(site: str, store, admin_key: str):
    """The Flask app of site `site` over an episode store."""
    if site not in SITES:
        raise ValueError(f"site: unknown {site!r}; known: {list(SITES)}")
    return importlib.import_module(f"esopt.web.apps.{site}").create_app(store, admin_key)
