"""The GitLab-like code host's pages: projects, issues, merge requests, stars."""

from __future__ import annotations

from flask import redirect, request

from esopt.web.apps.common import (
    EpisodeStore,
    commit,
    create_base_app,
    esc,
    form,
    link,
    one,
    page,
    rows,
    select,
    table,
    text_area,
    text_input,
)
from esopt.web.sites.gitlab import AGENT

_STATES = {"opened": "Open", "closed": "Closed", "merged": "Merged", "all": "All"}


def create_app(store: EpisodeStore, admin_key: str):
    """The code host's Flask app."""
    app = create_base_app("gitlab", store, admin_key)

    def show(title: str, body: str) -> str:
        return page("GitLab", title, body, [("/", "Projects"), ("/dashboard/issues",
                                                                "Your issues")])

    def project(ns, name):
        return one("SELECT * FROM projects WHERE namespace = ? AND name = ?", ns, name)

    @app.get("/")
    def index():
        projects = rows("SELECT p.*, (SELECT COUNT(*) FROM stars s WHERE s.project_id = p.id) "
                        "AS stars FROM projects p ORDER BY namespace, name")
        return show("Projects", table(["Project", "Description", "Stars"], [
            [link(f"/{p['namespace']}/{p['name']}", f"{p['namespace']} / {p['name']}"),
             esc(p["description"]), str(p["stars"])] for p in projects]))

    @app.get("/dashboard/issues")
    def my_issues():
        found = rows("SELECT i.*, p.namespace, p.name FROM issues i JOIN projects p ON "
                     "p.id = i.project_id WHERE i.assignee = ? ORDER BY i.id", AGENT)
        return show("Issues assigned to you", table(["Issue", "Project"], [
            [link(f"/{i['namespace']}/{i['name']}/-/issues/{i['number']}", i["title"]),
             esc(f"{i['namespace']}/{i['name']}")] for i in found]))

    @app.get("/<ns>/<name>")
    def project_page(ns, name):
        p = project(ns, name)
        stars = one("SELECT COUNT(*) AS n FROM stars WHERE project_id = ?", p["id"])["n"]
        starred = rows("SELECT 1 FROM stars WHERE project_id = ? AND user = ?", p["id"], AGENT)
        base = f"/{ns}/{name}"
        body = (f"<p>{esc(p['description'])}</p><p>{stars} stars</p>"
                + (form(f"{base}/unstar", "", "Unstar") if starred
                   else form(f"{base}/star", "", "Star"))
                + f"<ul><li>{link(base + '/-/issues', 'Issues')}</li>"
                f"<li>{link(base + '/-/merge_requests', 'Merge requests')}</li>"
                f"<li>{link(base + '/-/issues/new', 'New issue')}</li></ul>")
        return show(f"{ns} / {name}", body)

    @app.post("/<ns>/<name>/star")
    def star(ns, name):
        p = project(ns, name)
        commit("INSERT OR IGNORE INTO stars (user, project_id) VALUES (?, ?)", AGENT, p["id"])
        return redirect(f"/{ns}/{name}", 303)

    @app.post("/<ns>/<name>/unstar")
    def unstar(ns, name):
        p = project(ns, name)
        commit("DELETE FROM stars WHERE user = ? AND project_id = ?", AGENT, p["id"])
        return redirect(f"/{ns}/{name}", 303)

    def listing(ns, name, kind: str, states: tuple[str, ...]):
        p = project(ns, name)
        state = request.args.get("state", "opened")
        state = state if state in states + ("all",) else "opened"
        counts = {s: one(f"SELECT COUNT(*) AS n FROM {kind} WHERE project_id = ? AND "
                         "(state = ? OR ? = 'all')", p["id"], s, s)["n"]
                  for s in states + ("all",)}
        base = f"/{ns}/{name}/-/{kind}"
        tabs = " ".join(link(f"{base}?state={s}", f"{_STATES[s]} {counts[s]}")
                        for s in states + ("all",))
        items = rows(f"SELECT * FROM {kind} WHERE project_id = ? AND (state = ? OR ? = 'all') "
                     "ORDER BY number", p["id"], state, state)
        sign = "#" if kind == "issues" else "!"
        return f"<p>{tabs}</p>" + table(["Title", "Number", "State"], [
            [link(f"{base}/{i['number']}", i["title"]), f"{sign}{i['number']}", i["state"]]
            for i in items])

    @app.get("/<ns>/<name>/-/issues")
    def issues(ns, name):
        return show(f"Issues of {ns} / {name}", listing(ns, name, "issues", ("opened",
                                                                             "closed")))

    @app.get("/<ns>/<name>/-/merge_requests")
    def merge_requests(ns, name):
        return show(f"Merge requests of {ns} / {name}",
                    listing(ns, name, "merge_requests", ("opened", "merged", "closed")))

    @app.get("/<ns>/<name>/-/issues/<int:number>")
    def issue(ns, name, number):
        p = project(ns, name)
        i = one("SELECT * FROM issues WHERE project_id = ? AND number = ?", p["id"], number)
        base = f"/{ns}/{name}/-/issues/{number}"
        button = (form(f"{base}/close", "", "Close issue") if i["state"] == "opened"
                  else form(f"{base}/reopen", "", "Reopen issue"))
        body = (f"<p>Issue #{number} in {link(f'/{ns}/{name}', f'{ns} / {name}')}</p>"
                f"<p>Status: {i['state']}</p><p>Assignee: {esc(i['assignee'])}</p>"
                f"<p>Label: {esc(i['label'])}</p><p>{esc(i['description'])}</p>{button}")
        return show(i["title"], body)

    @app.post("/<ns>/<name>/-/issues/<int:number>/<op>")
    def issue_state(ns, name, number, op):
        p = project(ns, name)
        if op not in ("close", "reopen"):
            return redirect(f"/{ns}/{name}/-/issues/{number}", 303)
        commit("UPDATE issues SET state = ? WHERE project_id = ? AND number = ?",
               "closed" if op == "close" else "opened", p["id"], number)
        return redirect(f"/{ns}/{name}/-/issues/{number}", 303)

    @app.route("/<ns>/<name>/-/issues/new", methods=["GET", "POST"])
    def new_issue(ns, name):
        p = project(ns, name)
        users = [u["name"] for u in rows("SELECT name FROM users ORDER BY name")]
        error = ""
        if request.method == "POST":
            f = request.form
            title, assignee = f.get("title", "").strip(), f.get("assignee", "")
            if title and assignee in users:
                number = one("SELECT COALESCE(MAX(number), 0) + 1 AS n FROM issues WHERE "
                             "project_id = ?", p["id"])["n"]
                commit("INSERT INTO issues (project_id, number, title, description, state, "
                       "assignee, label) VALUES (?, ?, ?, ?, 'opened', ?, ?)", p["id"], number,
                       title[:300], f.get("description", "")[:5000], assignee,
                       f.get("label", "bug"))
                return redirect(f"/{ns}/{name}/-/issues/{number}", 303)
            error = "<p>A title and an assignee are required.</p>"
        fields = (text_input("title", "Title") + text_area("description", "Description")
                  + select("assignee", "Assignee", [("", "Unassigned")] + [(u, u) for u in users])
                  + select("label", "Label", [(x, x) for x in ("bug", "feature", "docs",
                                                              "question", "security")]))
        return show("New issue", error + form(f"/{ns}/{name}/-/issues/new", fields,
                                              "Create issue"))

    @app.get("/<ns>/<name>/-/merge_requests/<int:number>")
    def merge_request(ns, name, number):
        p = project(ns, name)
        m = one("SELECT * FROM merge_requests WHERE project_id = ? AND number = ?", p["id"],
                number)
        button = (form(f"/{ns}/{name}/-/merge_requests/{number}/merge", "", "Merge")
                  if m["state"] == "opened" else "")
        body = (f"<p>Merge request !{number} in {link(f'/{ns}/{name}', f'{ns} / {name}')}</p>"
                f"<p>Status: {m['state']}</p><p>Author: {esc(m['author'])}</p>"
                f"<p>Source branch: {esc(m['source_branch'])}</p>"
                f"<p>Target branch: {esc(m['target_branch'])}</p>{button}")
        return show(m["title"], body)

    @app.post("/<ns>/<name>/-/merge_requests/<int:number>/merge")
    def merge(ns, name, number):
        p = project(ns, name)
        commit("UPDATE merge_requests SET state = 'merged' WHERE project_id = ? AND number = ? "
               "AND state = 'opened'", p["id"], number)
        return redirect(f"/{ns}/{name}/-/merge_requests/{number}", 303)

    return app
