"""The five mini-sites' data by name: each module has SCHEMA and generate(seed) (its pages
are in `esopt.web.apps`)."""

from __future__ import annotations

import importlib
from types import ModuleType

SITES = ("forum", "gitlab", "cms", "map", "shop")
"""WebArena's five site categories: Reddit, GitLab, CMS (shop admin), Map, OSS (shop)."""


def site_module(name: str) -> ModuleType:
    """The module of site `name` (imported on demand: the server child needs only one)."""
    if name not in SITES:
        raise ValueError(f"site: unknown {name!r}; known: {list(SITES)}")
    return importlib.import_module(f"esopt.web.sites.{name}")
