"""Code-host tasks: count and read issues and merge requests, open pages, create and close
issues, merge, star."""

from __future__ import annotations

import random

from esopt.web.sites.gitlab import AGENT
from esopt.web.task import Check, Task, click, stop, task_adder, type_


def make_tasks(data: dict, rng: random.Random, per_template: int) -> list[Task]:
    """The code host's tasks over its seeded data."""
    projects = {p["id"]: p for p in data["projects"]}
    issues, mrs, tasks = data["issues"], data["merge_requests"], []

    def full(pid):
        p = projects[pid]
        return f"{p['namespace']}/{p['name']}"

    def open_project(pid):
        p = projects[pid]
        return click("link", f"{p['namespace']} / {p['name']}")

    add = task_adder("gitlab", tasks)

    for pid in rng.sample(sorted(projects), per_template):
        n = sum(1 for i in issues if i["project_id"] == pid and i["state"] == "opened")
        add("info", f"How many open issues does the project {full(pid)} have?",
            Check("exact_match", (str(n),)),
            [open_project(pid), click("link", "Issues"), stop(str(n))])
    for i in rng.sample(issues, per_template):
        add("info", f'Who is assigned to the issue "{i["title"]}" in {full(i["project_id"])}?',
            Check("exact_match", (i["assignee"],)),
            [open_project(i["project_id"]), click("link", "Issues"),
             click("link", f"All {sum(1 for x in issues if x['project_id'] == i['project_id'])}"),
             click("link", i["title"]), stop(i["assignee"])])
    for m in rng.sample(mrs, per_template):
        n_all = sum(1 for x in mrs if x["project_id"] == m["project_id"])
        add("info", f'What is the source branch of the merge request "{m["title"]}" in '
            f'{full(m["project_id"])}?', Check("exact_match", (m["source_branch"],)),
            [open_project(m["project_id"]), click("link", "Merge requests"),
             click("link", f"All {n_all}"), click("link", m["title"]),
             stop(m["source_branch"])])
    for pid in rng.sample(sorted(projects), per_template):
        p = projects[pid]
        add("navigation", f"Open the list of merge requests of the project {full(pid)}.",
            Check("url_match", (f"/{p['namespace']}/{p['name']}/-/merge_requests",)),
            [open_project(pid), click("link", "Merge requests"), stop()])
    users = sorted(u["name"] for u in data["users"])
    for k in range(per_template):
        pid, who = rng.choice(sorted(projects)), rng.choice(users)
        title = f"Crash when {rng.choice(['saving', 'loading', 'exporting'])} file {k}"
        add("content", f'Create an issue titled "{title}" in {full(pid)} and assign it to '
            f"{who}.", Check("db", sql="SELECT COUNT(*) FROM issues WHERE project_id = ? AND "
                             "title = ? AND assignee = ? AND state = 'opened'",
                             params=(pid, title, who), expected=((1,),)),
            [open_project(pid), click("link", "New issue"), type_("textbox", "Title", title),
             type_("combobox", "Assignee", who), click("button", "Create issue"), stop()])
    for i in rng.sample([i for i in issues if i["state"] == "opened"], per_template):
        add("content", f'Close the issue "{i["title"]}" in {full(i["project_id"])}.',
            Check("db", sql="SELECT state FROM issues WHERE id = ?", params=(i["id"],),
                  expected=(("closed",),)),
            [open_project(i["project_id"]), click("link", "Issues"), click("link", i["title"]),
             click("button", "Close issue"), stop()])
    for m in rng.sample([m for m in mrs if m["state"] == "opened"], per_template):
        add("content", f'Merge the merge request "{m["title"]}" in {full(m["project_id"])}.',
            Check("db", sql="SELECT state FROM merge_requests WHERE id = ?", params=(m["id"],),
                  expected=(("merged",),)),
            [open_project(m["project_id"]), click("link", "Merge requests"),
             click("link", m["title"]), click("button", "Merge"), stop()])
    for pid in rng.sample(sorted(projects), per_template):
        add("content", f"Star the project {full(pid)}.",
            Check("db", sql="SELECT COUNT(*) FROM stars WHERE project_id = ? AND user = ?",
                  params=(pid, AGENT), expected=((1,),)),
            [open_project(pid), click("button", "Star"), stop()])
    return tasks
