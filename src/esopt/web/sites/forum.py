"""The Reddit-like forum's data: forums, posts, comments, votes; the agent is AGENT."""

from __future__ import annotations

import random

from esopt.web.sites import words

AGENT = "agent_user"
PAGE_SIZE = 10
"""Posts per forum page."""
SCHEMA = """
CREATE TABLE users (name TEXT PRIMARY KEY, karma INTEGER NOT NULL);
CREATE TABLE forums (name TEXT PRIMARY KEY, description TEXT NOT NULL);
CREATE TABLE posts (id INTEGER PRIMARY KEY, forum TEXT NOT NULL, title TEXT NOT NULL,
                    body TEXT NOT NULL, author TEXT NOT NULL, score INTEGER NOT NULL);
CREATE TABLE comments (id INTEGER PRIMARY KEY, post_id INTEGER NOT NULL, author TEXT NOT NULL,
                       body TEXT NOT NULL);
CREATE TABLE votes (user TEXT NOT NULL, post_id INTEGER NOT NULL, PRIMARY KEY (user, post_id));
"""


def generate(seed: int) -> dict[str, list[dict]]:
    """The forum's rows by table, a function of the seed."""
    rng = random.Random(f"forum:{seed}")
    users = sorted(rng.sample([f"{a}_{b}" for a in words.FIRST for b in words.LAST], 24))
    data = {"users": [{"name": u, "karma": rng.randint(1, 9000)} for u in users + [AGENT]],
            "forums": [], "posts": [], "comments": [], "votes": []}
    titles: set[str] = set()
    for forum, topics in sorted(words.TOPIC.items()):
        data["forums"].append({"name": forum, "description": f"All about {forum}."})
        scores = rng.sample(range(1, 999), rng.randint(9, 16))  # distinct: a unique top post
        for score in scores:
            while True:
                title = (f"My {rng.choice(words.ADJ)} {rng.choice(topics)} and the "
                         f"{rng.choice(words.NOUN)}")
                if title not in titles:
                    titles.add(title)
                    break
            post_id = len(data["posts"]) + 1
            data["posts"].append({"id": post_id, "forum": forum, "title": title,
                                  "body": f"A few words about the {rng.choice(words.NOUN)}.",
                                  "author": rng.choice(users), "score": score})
            for _ in range(rng.randint(0, 6)):
                data["comments"].append({"id": len(data["comments"]) + 1, "post_id": post_id,
                                         "author": rng.choice(users),
                                         "body": f"So {rng.choice(words.ADJ)}!"})
    return data
