"""Forum tasks: read posts and comments, open profiles, post, upvote and reply."""

from __future__ import annotations

import random

from esopt.web.sites.forum import AGENT
from esopt.web.task import Check, Task, click, search, stop, task_adder, type_


def _find(title: str) -> tuple:
    return (*search("Search", title), click("link", title))


def make_tasks(data: dict, rng: random.Random, per_template: int) -> list[Task]:
    """The forum's tasks over its seeded data."""
    posts, tasks = data["posts"], []
    n_comments = {p["id"]: 0 for p in posts}
    for c in data["comments"]:
        n_comments[c["post_id"]] += 1

    add = task_adder("forum", tasks)

    for forum in rng.sample(sorted({p["forum"] for p in posts}), min(per_template, 6)):
        top = max((p for p in posts if p["forum"] == forum), key=lambda p: p["score"])
        add("info", f"What is the title of the highest-scored post in f/{forum}?",
            Check("exact_match", (top["title"],)), [click("link", f"f/{forum}"),
                                                    stop(top["title"])])
    for p in rng.sample(posts, per_template):
        add("info", f'How many comments does the post "{p["title"]}" have?',
            Check("exact_match", (str(n_comments[p["id"]]),)),
            [*_find(p["title"]), stop(str(n_comments[p["id"]]))])
    for p in rng.sample(posts, per_template):
        add("info", f'Who is the author of the post "{p["title"]}"? Answer with the user name.',
            Check("exact_match", (p["author"],)), [*_find(p["title"]), stop(p["author"])])
    for p in rng.sample(posts, per_template):
        add("navigation", f'Open the profile page of the author of the post "{p["title"]}".',
            Check("url_match", (f"/u/{p['author']}",)),
            [*_find(p["title"]), click("link", p["author"]), stop()])
    for i in range(per_template):
        forum = rng.choice(sorted({p["forum"] for p in posts}))
        title = f"Question {i}: has anyone tried this {forum} tip?"
        body = f"Details {rng.random():.6f}"
        add("content", f'Create a post in f/{forum} titled "{title}" with the body "{body}".',
            Check("db", sql="SELECT COUNT(*) FROM posts WHERE forum = ? AND title = ? AND "
                  "body = ? AND author = ?", params=(forum, title, body, AGENT),
                  expected=((1,),)),
            [click("link", "Submit"), type_("combobox", "Forum", forum),
             type_("textbox", "Title", title), type_("textbox", "Body", body),
             click("button", "Create post"), stop()])
    for p in rng.sample(posts, per_template):
        add("content", f'Upvote the post "{p["title"]}".',
            Check("db", sql="SELECT p.score, COUNT(v.user) FROM posts p LEFT JOIN votes v ON "
                  "v.post_id = p.id AND v.user = ? WHERE p.id = ?", params=(AGENT, p["id"]),
                  expected=((p["score"] + 1, 1),)),
            [*_find(p["title"]), click("button", "Upvote"), stop()])
    for p in rng.sample(posts, per_template):
        reply = f"Thanks, this helped with my {rng.choice(['project', 'trip', 'dinner'])}!"
        add("content", f'Reply to the post "{p["title"]}" with the comment "{reply}".',
            Check("db", sql="SELECT COUNT(*) FROM comments WHERE post_id = ? AND author = ? "
                  "AND body = ?", params=(p["id"], AGENT, reply), expected=((1,),)),
            [*_find(p["title"]), type_("textbox", "Comment", reply),
             click("button", "Post comment"), stop()])
    return tasks
