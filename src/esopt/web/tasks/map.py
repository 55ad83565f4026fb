"""Map tasks: addresses, categories, nearby places, counts, route lengths and times,
directions pages."""

from __future__ import annotations

import random
from urllib.parse import urlencode

from esopt.web.sites.map import CATEGORIES, nearest, shortest_route, travel_minutes
from esopt.web.task import Check, Task, click, search, stop, task_adder, type_


def make_tasks(data: dict, rng: random.Random, per_template: int) -> list[Task]:
    """The map's tasks over its seeded data."""
    places, roads, tasks = data["places"], data["roads"], []

    add = task_adder("map", tasks)

    def find(p):
        return (*search("Search places", p["name"]), click("link", p["name"]))

    def directions(a, b, mode):
        return (click("link", "Directions"), type_("textbox", "From", a["name"]),
                type_("textbox", "To", b["name"]), type_("combobox", "Mode", mode.title()),
                click("button", "Go"))

    for p in rng.sample(places, per_template):
        add("info", f"What is the address of {p['name']}?", Check("exact_match", (p["address"],)),
            [*find(p), stop(p["address"])])
    for p in rng.sample(places, per_template):
        close = nearest(places, p, 1)[0]
        add("info", f"Which place is nearest to {p['name']} in a straight line?",
            Check("exact_match", (close["name"],)), [*find(p), stop(close["name"])])
    for cat in rng.sample(CATEGORIES, per_template):
        n = sum(1 for p in places if p["category"] == cat)
        add("info", f"How many places of the category {cat} does the map list?",
            Check("exact_match", (str(n),)), [click("link", cat.title()), stop(str(n))])
    for _ in range(per_template):
        a, b = rng.sample(places, 2)
        km = shortest_route(roads, a["id"], b["id"])[0]
        add("info", f"How long is the drive from {a['name']} to {b['name']}, in km?",
            Check("must_include", (f"{km:.1f}",)),
            [*directions(a, b, "driving"), stop(f"{km:.1f} km")])
    for _ in range(per_template):
        a, b = rng.sample(places, 2)
        minutes = travel_minutes(shortest_route(roads, a["id"], b["id"])[0], "walking")
        add("info", f"How many minutes does it take to walk from {a['name']} to {b['name']}?",
            Check("must_include", (str(minutes),)),
            [*directions(a, b, "walking"), stop(f"{minutes} min")])
    for _ in range(per_template):
        a, b = rng.sample(places, 2)
        mode = rng.choice(["driving", "walking"])
        url = "/directions?" + urlencode({"from": a["name"], "to": b["name"], "mode": mode})
        add("navigation", f"Show the {mode} directions from {a['name']} to {b['name']}.",
            Check("url_match", (url,)), [*directions(a, b, mode), stop()])
    for p in rng.sample(places, per_template):
        add("info", f"What is the category of {p['name'].rsplit(' ', 1)[0]} on the map?",
            Check("exact_match", (p["category"],)),
            [*search("Search places", p["name"].rsplit(" ", 1)[0]), click("link", p["name"]),
             stop(p["category"])])
    return tasks
