"""The short family: tasks of one or two actions from each site's start page.

The tiny web scale's family (issue 37): the standard tasks take 2-7 actions and
SmolLM2-135M solves none of them, so a base success rate cannot move. These ask for one
page: open a link of the start page that the task names (click it, then stop), or go to a
URL the task spells out (goto, then stop); url_match judges the page reached. Same sites,
data, checks and actions as the standard tasks.
"""

from __future__ import annotations

from esopt.web.task import Check, Task, click, goto, site_alias, stop

GITLAB_PROJECTS = 2
"""Projects of the code host's start page that a 20-line window shows (the page lists
them by namespace, then name); the rest would need a scroll, a third action."""


def _open(site: str, tasks: list[Task], intent: str, name: str, path: str) -> None:
    """Two tasks that end on `path`: click the start page's link `name` (the intent names
    it), or go to the URL the intent spells out (WebArena's goto action)."""
    check = Check("url_match", (path,))
    for text, first in ((intent, click("link", name)),
                        (f"Go to the URL {site_alias(site)}{path}", goto(path))):
        tasks.append(Task(f"{site}/short-{len(tasks):02d}", site, "navigation", text, check,
                          (first, stop())))


def make_tasks(site: str, data: dict) -> list[Task]:
    """The short tasks of one site over its seeded data, in a fixed order."""
    tasks: list[Task] = []
    if site == "forum":
        for f in sorted(f["name"] for f in data["forums"]):
            _open(site, tasks, f"Open the forum 'f/{f}'.", f"f/{f}", f"/f/{f}")
    elif site == "gitlab":
        _open(site, tasks, "Open the page 'Your issues'.", "Your issues", "/dashboard/issues")
        shown = sorted(data["projects"], key=lambda p: (p["namespace"], p["name"]))
        for p in shown[:GITLAB_PROJECTS]:
            _open(site, tasks, f"Open the project '{p['namespace']} / {p['name']}'.",
                  f"{p['namespace']} / {p['name']}", f"/{p['namespace']}/{p['name']}")
    elif site == "cms":
        for page in ("Products", "Orders", "Customers"):
            _open(site, tasks, f"Open the admin page '{page}'.", page,
                  f"/admin/{page.lower()}")
    elif site == "map":
        from esopt.web.sites.map import CATEGORIES

        for cat in CATEGORIES:
            _open(site, tasks, f"Open the category '{cat.title()}' of the map.",
                  cat.title(), f"/category/{cat}")
    elif site == "shop":
        for c in sorted(data["categories"], key=lambda c: c["name"]):
            _open(site, tasks, f"Open the category '{c['name']}' of the shop.", c["name"],
                  f"/category/{c['slug']}")
        for name, path in (("My Cart", "/cart"), ("My Wish List", "/wishlist"),
                           ("My Orders", "/account/orders")):
            _open(site, tasks, f"Open the page '{name}'.", name, path)
    else:
        raise ValueError(f"site: unknown {site!r}")
    return tasks
