"""A web task: the intent, where it starts, its programmatic check and a scripted solution.

Check kinds follow WebArena's evaluators: `exact_match` and `must_include` on the `stop`
answer, `url_match` on the last page's URL, and `db` (WebArena's program_html, here a
query on the episode's database after the episode) for content changes. Tasks loaded from
a real WebArena deployment's config files (`esopt.web.webarena`) also use `program_html`
(required contents of a page after the episode) and `fuzzy_match` (a judge hook).
"""

from __future__ import annotations

from dataclasses import dataclass

CHECK_KINDS = ("exact_match", "must_include", "url_match", "db", "program_html",
               "fuzzy_match")
TASK_KINDS = ("info", "navigation", "content")


def site_alias(site: str) -> str:
    """The stable origin a local site is shown under (.test: reserved, never resolves)."""
    return f"http://{site}.test"


@dataclass(frozen=True)
class Check:
    """How an episode is judged: `reference` for answers, URLs and page contents (an entry
    "a |OR| b" accepts either), `sql` + `expected` (the query's rows as tuples) for a
    database state, `url` for the page a program_html check reads ("": the last page) and
    `exact` whether that page's text must equal the reference (else include it)."""

    kind: str
    reference: tuple[str, ...] = ()
    sql: str = ""
    params: tuple = ()
    expected: tuple[tuple, ...] = ()
    url: str = ""
    exact: bool = False

    def __post_init__(self):
        if self.kind not in CHECK_KINDS:
            raise ValueError(f"check kind must be one of {CHECK_KINDS}, got {self.kind!r}")
        if (self.kind == "db") != bool(self.sql):
            raise ValueError("a db check needs sql (and only a db check has it)")


@dataclass(frozen=True)
class Step:
    """One step of a scripted solution: goto a site path, click or type into the element
    with this role and name, or stop with an answer."""

    verb: str
    role: str = ""
    name: str = ""
    text: str = ""


@dataclass(frozen=True)
class Task:
    """One task on one site."""

    id: str
    site: str
    kind: str
    intent: str
    check: Check
    solution: tuple[Step, ...]
    start_path: str = "/"
    """A path of the task's site, or a whole URL (tasks of a real deployment)."""
    also: tuple[Check, ...] = ()
    """Further checks that must pass too (WebArena combines evaluators)."""

    def __post_init__(self):
        if self.kind not in TASK_KINDS:
            raise ValueError(f"task {self.id}: kind must be one of {TASK_KINDS}")

    @property
    def checks(self) -> tuple[Check, ...]:
        """Every check of the task (all must pass)."""
        return (self.check, *self.also)


def goto(path: str) -> Step:
    """Open a path of the task's site."""
    return Step("goto", text=path)


def click(role: str, name: str) -> Step:
    """Click the element with this role and name."""
    return Step("click", role, name)


def type_(role: str, name: str, text: str) -> Step:
    """Type into the element with this role and name (without pressing Enter)."""
    return Step("type", role, name, text)


def stop(answer: str = "") -> Step:
    """End the episode with an answer."""
    return Step("stop", text=answer)


def search(label: str, query: str, button: str = "Search", role: str = "searchbox") -> tuple:
    """Type a query into a search box and press its button."""
    return (type_(role, label, query), click("button", button))


def task_adder(site: str, tasks: list[Task]):
    """add(kind, intent, check, solution): append `site`'s next task to `tasks`, its id
    "{site}/{index:03d}" in order of creation."""
    def add(kind, intent, check, solution) -> None:
        tasks.append(Task(f"{site}/{len(tasks):03d}", site, kind, intent, check,
                          tuple(solution)))
    return add
