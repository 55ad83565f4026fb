"""WebArena-Lite-style web tasks on local mini-sites (`esopt.web`).

Each episode is one task on one site: the site's server (a child process on 127.0.0.1,
shared by all episodes of this process) gives the episode its own copy of the seeded
database, and a text browser shows the page as an accessibility tree. The policy answers
with one WebArena action per turn (click [id], type [id] [text], goto [url], scroll
[up|down], go_back, stop [answer]); the observation is the current page only (no history,
as WebArena's prompts). The episode ends at `stop` or after `max_turns`; then the task's
checks run (answer, last URL, the episode's database, a page) and the reward is 1 or 0.

With `webarena` (a WebArena config file or directory) and `webarena_urls` (its sites' base
URLs) the same environment plays a real WebArena deployment's tasks instead: no local
server is started, the browser may visit only those URLs, and `judge` ("module:function",
see `esopt.web.checks.Judge`) decides fuzzy_match answers (without it they fail).
"""

from __future__ import annotations

import secrets

from esopt.chat import Conversation
from esopt.envs.base import Environment, StepResult, example_turns, register
from esopt.web.actions import parse_action
from esopt.web.checks import task_passes
from esopt.web.protocol import EPISODE_HEADER
from esopt.web.sites import SITES
from esopt.web.task import Task, site_alias
from esopt.web.tasks import SPLITS, all_tasks, check_family, in_split

BROWSERS = ("text", "chromium")

SYSTEM = (
    "You are an autonomous agent using a web browser to accomplish a task. Each turn you see "
    "the objective, the current page's URL and its accessibility tree, where each element "
    "has an id in brackets. Answer with one action, written last in triple backticks:\n"
    "```click [id]``` click an element (follow a link, press a button)\n"
    "```type [id] [text]``` type into a field (then Enter; add [0] for no Enter); for a "
    "drop-down, type an option's text\n"
    "```goto [url]``` open a URL of this site\n"
    "```scroll [down]``` or ```scroll [up]``` see more of the page\n"
    "```go_back``` return to the previous page\n"
    "```stop [answer]``` finish, with the answer if the task asks a question (else empty)"
)

# The worked example (option `example`): two solved turns on a made-up site (a click, a
# goto) before each observation. Without it SmolLM2-135M rarely wrote an action at all;
# with it, it does, but matches a link's name to its id only by chance (issue 37).
EXAMPLE = (
    {"role": "user", "content": "OBJECTIVE: Open the page 'Staff'.\nTab: Home | Intranet\n"
     "URL: http://intranet.test/\n[1] link 'Home'\n[2] link 'Staff'\n[3] link 'Reports'\n"
     "[4] heading 'Welcome'\n[5] link 'Help'\n(lines 1-5 of 5)"},
    {"role": "assistant", "content": "```click [2]```"},
    {"role": "user", "content": "OBJECTIVE: Go to the URL http://intranet.test/reports\n"
     "Tab: Home | Intranet\nURL: http://intranet.test/\n[1] link 'Home'\n"
     "[2] link 'Staff'\n[3] link 'Reports'\n[4] heading 'Welcome'\n[5] link 'Help'\n"
     "(lines 1-5 of 5)"},
    {"role": "assistant", "content": "```goto [http://intranet.test/reports]```"},
)


@register("web")
class WebEnv(Environment):
    """Options: sites (comma-separated, default all five), split (all|train|test),
    family (full: the standard tasks; short: one or two actions from a start page),
    example (two solved turns before each observation),
    data_seed (the sites' data and tasks), max_turns, viewport_lines, max_chars, skill,
    browser (text: HTTP + HTML renderer, the default; chromium: Playwright + Chromium);
    webarena, webarena_urls, judge: a real WebArena deployment's tasks instead."""

    max_new_tokens = 256
    indexed_tasks = True  # task seed i is task i of the selection (mod its size)

    def __init__(self, sites: str = ",".join(SITES), split: str = "all", data_seed: int = 0,
                 max_turns: int = 15, viewport_lines: int = 60, max_chars: int = 6000,
                 skill: str = "", max_new_tokens: int = 256, browser: str = "text",
                 webarena: str = "", webarena_urls: dict | None = None, judge: str = "",
                 family: str = "full", example: bool = False):
        names = tuple(s.strip() for s in sites.split(",") if s.strip())
        unknown = [s for s in names if s not in SITES]
        if unknown or not names:
            raise ValueError(f"sites: unknown {unknown}; known: {list(SITES)}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if browser not in BROWSERS:
            raise ValueError(f"browser must be one of {BROWSERS}, got {browser!r}")
        check_family(family)
        if webarena and family != "full":
            raise ValueError(f"family {family!r} is a family of the local sites' tasks; "
                             "a WebArena deployment has its own")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if viewport_lines < 1 or max_chars < 100:
            raise ValueError(f"need viewport_lines >= 1 and max_chars >= 100, got "
                             f"{viewport_lines} and {max_chars}")
        if webarena:
            from esopt.web.webarena import load_webarena_tasks

            self.tasks = tuple(t for t in load_webarena_tasks(webarena, webarena_urls or {})
                               if in_split(t, split))
            self.origins = sorted(set((webarena_urls or {}).values()))
        else:
            self.tasks = all_tasks(data_seed, names, split, family)
            self.origins = []
        if not self.tasks:
            raise ValueError(f"no tasks (webarena={webarena!r}, split={split!r})")
        self.judge = None
        if judge:
            from esopt.web.webarena import load_judge

            self.judge = load_judge(judge)
        self.server = None
        self.num_tasks = len(self.tasks)
        self.data_seed, self.max_turns, self.skill = data_seed, max_turns, skill
        self.viewport_lines, self.max_chars = viewport_lines, max_chars
        self.max_new_tokens, self.browser_kind = max_new_tokens, browser
        self.browser = None
        self.example = example_turns(example, EXAMPLE)
        self._solved = False

    def system_prompt(self) -> str:
        return f"{SYSTEM}\n\n{self.skill.strip()}" if self.skill.strip() else SYSTEM

    def reset(self, seed: int) -> Conversation:
        # Imported here: `esopt.envs` registers this environment without the web extra.
        from esopt.web.server import shared_site

        if self.browser_kind == "chromium":
            from esopt.web.chromium import ChromiumBrowser as Browser
        else:
            from esopt.web.browser import TextBrowser as Browser

        self.close()
        self.task = self.tasks[seed % len(self.tasks)]
        self.episode = secrets.token_hex(8)
        self.headers = {EPISODE_HEADER: self.episode}
        if self.origins:  # a real deployment: its own sites, reset by its operator
            self.server, origins, aliases = None, self.origins, {}
        else:
            self.server = shared_site(self.task.site, self.data_seed)
            self.server.reset(self.episode)
            origins, aliases = [self.server.url], {site_alias(self.task.site): self.server.url}
        self.episode_origins = origins
        self.browser = Browser(origins, self.headers, self.viewport_lines, self.max_chars,
                               aliases=aliases)
        self.turn, self._solved, self.answer = 0, False, None
        feedback = self.browser.goto(self.task.start_path)
        return self._observation(feedback, None)

    def _observation(self, feedback: str, last_action: str | None) -> Conversation:
        parts = [f"OBJECTIVE: {self.task.intent}", self.browser.observation()]
        if last_action is not None:
            parts.append(f"PREVIOUS ACTION: {last_action}")
        if feedback:
            parts.append(f"FEEDBACK: {feedback}")
        return [{"role": "system", "content": self.system_prompt()},
                *self.example,
                {"role": "user", "content": "\n".join(parts)}]

    def step(self, completion: str) -> StepResult:
        self.turn += 1
        action = parse_action(completion)
        if isinstance(action, str):
            feedback, shown = action, "(none)"
        elif action.verb == "stop":
            return self._finish(action.text)
        else:
            feedback = self.browser.act(action)
            shown = _describe(action)
        if self.turn >= self.max_turns:
            return self._finish(None)
        return StepResult(self._observation(feedback, shown), 0.0, False, self._info())

    def _page_text(self, url: str) -> str | None:
        """The text of a page after the episode (program_html checks), as this episode
        sees it."""
        from esopt.web.browser import TextBrowser

        reader = TextBrowser(self.episode_origins, self.headers)
        try:
            if reader.goto(url) != "" or not reader.page.nodes:
                return None
            return " ".join(f"{n.name} {n.value}".strip() for n in reader.page.nodes)
        finally:
            reader.close()

    def _finish(self, answer: str | None) -> StepResult:
        self.answer = answer
        db = (self.server.episode_db(self.episode)
              if self.server is not None and any(c.kind == "db" for c in self.task.checks)
              else None)
        self._solved = task_passes(self.task, answer, self.browser.url, db,
                                   page_text=self._page_text, judge=self.judge)
        # problem_id and gold: what Trace2Skill's distillation reads from a failed episode.
        info = {**self._info(), "answer": answer, "url": self.browser.shown(self.browser.url),
                "problem_id": self.task.id, "gold": _expected(self.task)}
        self.close()
        return StepResult([], float(self._solved), True, info)

    def _info(self) -> dict:
        return {"task_id": self.task.id, "site": self.task.site, "task_kind": self.task.kind,
                "check": self.task.check.kind, "turn": self.turn}

    def close(self) -> None:
        """Drop the episode's database copy and close the browser."""
        if self.browser is not None:
            self.browser.close()
            self.browser = None
            if self.server is not None:
                try:
                    self.server.release(self.episode)
                except Exception:  # noqa: BLE001  (a server gone at exit has nothing to release)
                    pass

    @property
    def success(self) -> bool:
        return self._solved


def _expected(task: Task) -> str:
    """What the check wanted, in words (for skill distillation; never shown to the policy
    during the episode)."""
    check = task.check
    if check.kind in ("exact_match", "must_include"):
        return " / ".join(check.reference)
    if check.kind == "url_match":
        return f"end on the page {check.reference[0]}"
    return f"the change asked for saved on the site ({task.intent})"


def _describe(action) -> str:
    if action.verb == "type":
        return f"type [{action.element}] [{action.text}]" + ("" if action.enter else " [0]")
    if action.element is not None:
        return f"{action.verb} [{action.element}]"
    return f"{action.verb} [{action.text}]" if action.text else action.verb
