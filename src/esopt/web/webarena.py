"""Tasks of a real WebArena deployment, from WebArena's config files.

A config (one JSON object per task: `config_files/*.json`, or a list of them such as
`test.raw.json`) has `task_id`, `sites`, `start_url` with placeholders (`__REDDIT__`, ...),
`intent` and `eval`: `eval_types` among string_match, url_match and program_html, with
`reference_answers` (exact_match, must_include, fuzzy_match), `reference_url` and
`program_html` entries (url, locator, required_contents). They become `Task`s whose
checks are the same evaluators: fuzzy_match asks the judge hook, program_html reads the
page's text after the episode (only the whole page: a JavaScript `locator` needs the
deployment's own evaluator and is refused at load time). WebArena's sites are reset by
restarting their containers, which is the deployment's business, not this module's.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from esopt.data.files import DataFileError, read_json_records
from esopt.web.checks import Judge
from esopt.web.task import Check, Task

SITE_OF = {"reddit": "forum", "gitlab": "gitlab", "shopping_admin": "cms", "map": "map",
           "shopping": "shop", "wikipedia": "wikipedia"}
"""WebArena's site names -> the site categories of the local mini-sites (Table 4)."""
PLACEHOLDERS = {"__REDDIT__": "reddit", "__GITLAB__": "gitlab", "__SHOPPING__": "shopping",
                "__SHOPPING_ADMIN__": "shopping_admin", "__MAP__": "map",
                "__WIKIPEDIA__": "wikipedia"}


def _fill(text: str, urls: dict[str, str]) -> str:
    # Longest first: __SHOPPING_ADMIN__ before __SHOPPING__.
    for holder in sorted(PLACEHOLDERS, key=len, reverse=True):
        if holder in text:
            site = PLACEHOLDERS[holder]
            if site not in urls:
                raise ValueError(f"webarena_urls: no URL for {site!r} (needed by {text!r})")
            text = text.replace(holder, urls[site].rstrip("/"))
    return text


def _answer_checks(ref: dict) -> list[Check]:
    checks = []
    if isinstance(ref.get("exact_match"), str):
        checks.append(Check("exact_match", (ref["exact_match"],)))
    if ref.get("must_include"):
        checks.append(Check("must_include", tuple(ref["must_include"])))
    fuzzy = ref.get("fuzzy_match")
    if fuzzy and fuzzy != "N/A":
        checks.append(Check("fuzzy_match", tuple(fuzzy if isinstance(fuzzy, list) else [fuzzy])))
    elif fuzzy == "N/A":  # WebArena: the task is unachievable, the answer must say so
        checks.append(Check("exact_match", ("N/A",)))
    return checks


def _html_checks(entries: list[dict], urls: dict[str, str]) -> list[Check]:
    checks = []
    for entry in entries:
        if entry.get("locator"):
            raise ValueError(f"program_html locator {entry['locator'][:80]!r}: JavaScript "
                             "locators are not supported (only the whole page)")
        url = "" if entry.get("url", "last") == "last" else _fill(entry["url"], urls)
        required = entry.get("required_contents", {})
        if "exact_match" in required:
            checks.append(Check("program_html", (required["exact_match"],), url=url, exact=True))
        if required.get("must_include"):
            checks.append(Check("program_html", tuple(required["must_include"]), url=url))
    return checks


def task_from_config(config: dict, urls: dict[str, str]) -> Task:
    """One WebArena config as a Task (no scripted solution: oracles need local sites)."""
    ev = config["eval"]
    checks: list[Check] = []
    if "string_match" in ev["eval_types"]:
        checks += _answer_checks(ev.get("reference_answers") or {})
    if "url_match" in ev["eval_types"]:
        checks.append(Check("url_match", (_fill(ev["reference_url"].split(" |OR| ")[0],
                                                urls),)))
    if "program_html" in ev["eval_types"]:
        checks += _html_checks(ev.get("program_html") or [], urls)
    if not checks:
        raise ValueError(f"task {config.get('task_id')}: no supported evaluator in "
                         f"{ev['eval_types']}")
    kind = ("content" if "program_html" in ev["eval_types"] else
            "navigation" if ev["eval_types"] == ["url_match"] else "info")
    site = SITE_OF.get((config.get("sites") or ["?"])[0], "other")
    return Task(f"webarena/{config['task_id']}", site, kind, config["intent"], checks[0], (),
                start_path=_fill(config["start_url"], urls), also=tuple(checks[1:]))


def load_webarena_tasks(path: str | Path, urls: dict[str, str]) -> tuple[Task, ...]:
    """Tasks from a JSON file (one config or a list) or a directory of them, by task id;
    `urls` maps WebArena's site names (reddit, gitlab, shopping, shopping_admin, map,
    wikipedia) to the deployment's base URLs."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    found = []  # (task_id, file, line, config), in file order
    for f in files:
        for line, config in read_json_records(f):
            if not isinstance(config, dict) or "task_id" not in config:
                raise DataFileError.at(f, line, "expected a task config (an object with "
                                                "task_id)")
            try:
                found.append((int(config["task_id"]), f, line, config))
            except (TypeError, ValueError):
                raise DataFileError.at(f, line, f"task_id {config['task_id']!r} is not an "
                                                "integer") from None
    found.sort(key=lambda item: item[0])
    tasks = []
    for _, f, line, config in found:
        try:
            tasks.append(task_from_config(config, urls))
        except KeyError as e:
            raise DataFileError.at(f, line, f"task {config['task_id']}: no {e} key") from None
        except (TypeError, AttributeError, ValueError) as e:
            raise DataFileError.at(f, line, e) from None
    return tuple(tasks)


def load_judge(spec: str) -> Judge:
    """The judge hook `module:function`, a Judge (e.g. one that asks an LLM)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"judge: expected 'module:function', got {spec!r}")
    return getattr(importlib.import_module(module), name)
