"""The GitLab-like code host's data: projects, issues, merge requests, stars."""

from __future__ import annotations

import random

from esopt.web.sites import words

AGENT = "agent_user"
SCHEMA = """
CREATE TABLE users (name TEXT PRIMARY KEY);
CREATE TABLE projects (id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL,
                       description TEXT NOT NULL, UNIQUE (namespace, name));
CREATE TABLE issues (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL,
                     number INTEGER NOT NULL, title TEXT NOT NULL, description TEXT NOT NULL,
                     state TEXT NOT NULL, assignee TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE merge_requests (id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL,
                             number INTEGER NOT NULL, title TEXT NOT NULL,
                             source_branch TEXT NOT NULL, target_branch TEXT NOT NULL,
                             state TEXT NOT NULL, author TEXT NOT NULL);
CREATE TABLE stars (user TEXT NOT NULL, project_id INTEGER NOT NULL,
                    PRIMARY KEY (user, project_id));
"""
LABELS = ("bug", "feature", "docs", "question", "security")
VERBS = ("Fix", "Add", "Remove", "Refactor", "Document", "Speed up")


def generate(seed: int) -> dict[str, list[dict]]:
    """The code host's rows by table, a function of the seed."""
    rng = random.Random(f"gitlab:{seed}")
    users = sorted(rng.sample(words.FIRST, 12))
    data = {"users": [{"name": u} for u in users + [AGENT]], "projects": [], "issues": [],
            "merge_requests": [], "stars": []}
    names = rng.sample([f"{a}-{n}" for a in words.ADJ for n in words.NOUN], 10)
    for pid, name in enumerate(names, 1):
        data["projects"].append({"id": pid, "namespace": rng.choice(users), "name": name,
                                 "description": f"A {rng.choice(words.ADJ)} toolkit."})
        titles = rng.sample([f"{v} the {a} {n}" for v in VERBS for a in words.ADJ[:8]
                             for n in words.NOUN[:8]], rng.randint(5, 12) + rng.randint(3, 6))
        n_issues = len(titles) - rng.randint(3, 6)
        for number, title in enumerate(titles[:n_issues], 1):
            data["issues"].append({
                "id": len(data["issues"]) + 1, "project_id": pid, "number": number,
                "title": title, "description": f"Seen on {rng.choice(words.NOUN)}.",
                "state": rng.choice(["opened", "opened", "closed"]),
                "assignee": rng.choice(users), "label": rng.choice(LABELS)})
        for number, title in enumerate(titles[n_issues:], 1):
            data["merge_requests"].append({
                "id": len(data["merge_requests"]) + 1, "project_id": pid, "number": number,
                "title": title, "source_branch": f"{rng.choice(words.NOUN)}-{rng.randint(1, 99)}",
                "target_branch": "main", "state": rng.choice(["opened", "opened", "merged"]),
                "author": rng.choice(users)})
    return data
