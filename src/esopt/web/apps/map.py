"""The map service's pages: search, categories, places, directions."""

from __future__ import annotations

import math

from flask import request

from esopt.web.apps.common import (
    EpisodeStore,
    create_base_app,
    esc,
    form,
    like_pattern,
    link,
    one,
    page,
    rows,
    select,
    text_input,
)
from esopt.web.sites.map import CATEGORIES, nearest, shortest_route, travel_minutes


def _search_box(q: str = "") -> str:
    return form("/search", text_input("q", "Search places", q, "search"), "Search", "get")


def _place_list(places) -> str:
    return "<ul>" + "".join(f"<li>{link('/place/' + str(p['id']), p['name'])}</li>"
                            for p in places) + "</ul>"


def create_app(store: EpisodeStore, admin_key: str):
    """The map service's Flask app."""
    app = create_base_app("map", store, admin_key)

    def show(title: str, body: str) -> str:
        return page("Map", title, body, [("/", "Map"), ("/directions", "Directions")])

    @app.get("/")
    def index():
        cats = "".join(f"<li>{link(f'/category/{c}', c.title())}</li>" for c in CATEGORIES)
        return show("Map", _search_box() + f"<h2>Categories</h2><ul>{cats}</ul>")

    @app.get("/search")
    def search():
        q = request.args.get("q", "").strip()
        found = rows("SELECT * FROM places WHERE name LIKE ? ESCAPE '\\' ORDER BY name",
                     like_pattern(q)) if q else []
        return show("Search", _search_box(q) + _place_list(found))

    @app.get("/category/<cat>")
    def category(cat):
        found = rows("SELECT * FROM places WHERE category = ? ORDER BY name", cat)
        return show(cat.title(), f"<p>{len(found)} places</p>" + _place_list(found))

    @app.get("/place/<int:pid>")
    def place(pid):
        p = one("SELECT * FROM places WHERE id = ?", pid)
        near = nearest([dict(r) for r in rows("SELECT * FROM places")], dict(p))
        items = "".join(f"<li>{link('/place/' + str(q['id']), q['name'])} "
                        f"{math.dist((q['x'], q['y']), (p['x'], p['y'])):.1f} km away</li>"
                        for q in near)
        return show(p["name"], f"<p>Category: {p['category']}</p><p>Address: "
                    f"{esc(p['address'])}</p><p>Coordinates: {p['x']:.2f}, {p['y']:.2f}</p>"
                    f"<h2>Nearby</h2><ul>{items}</ul>")

    @app.get("/directions")
    def directions():
        a, b = request.args.get("from", "").strip(), request.args.get("to", "").strip()
        mode = request.args.get("mode", "driving")
        mode = mode if mode in ("driving", "walking") else "driving"
        fields = (text_input("from", "From", a) + text_input("to", "To", b)
                  + select("mode", "Mode", [("driving", "Driving"), ("walking", "Walking")],
                           mode))
        body = form("/directions", fields, "Go", "get")
        if a or b:
            places = {r["name"].lower(): r for r in rows("SELECT * FROM places")}
            pa, pb = places.get(a.lower()), places.get(b.lower())
            if pa is None or pb is None:
                body += f"<p>No place named {esc(a if pa is None else b)}.</p>"
            else:
                km, path = shortest_route([dict(r) for r in rows("SELECT * FROM roads")],
                                          pa["id"], pb["id"])
                names = {r["id"]: r["name"] for r in places.values()}
                body += (f"<p>Distance: {km:.1f} km</p><p>Time: "
                         f"{travel_minutes(km, mode)} min</p><p>Route: "
                         + esc(" -> ".join(names[i] for i in path)) + "</p>")
        return show("Directions", body)

    return app
