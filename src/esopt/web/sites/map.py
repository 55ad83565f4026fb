"""The map service's data: places on a city grid, a road network, shortest routes."""

from __future__ import annotations

import heapq
import math
import random

from esopt.web.sites import words

SCHEMA = """
CREATE TABLE places (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, category TEXT NOT NULL,
                     address TEXT NOT NULL, x REAL NOT NULL, y REAL NOT NULL);
CREATE TABLE roads (a INTEGER NOT NULL, b INTEGER NOT NULL, km REAL NOT NULL);
"""
CATEGORIES = ("cafe", "museum", "hospital", "park", "library", "station", "hotel", "school")
SPEED_KMH = {"driving": 40.0, "walking": 5.0}
ROAD_FACTOR = 1.25
"""Roads are longer than the straight line between their ends."""


def generate(seed: int) -> dict[str, list[dict]]:
    """Places (x, y in km on a 20 km square) and roads: a spanning tree plus each place's
    two nearest neighbours, so every place reaches every other."""
    rng = random.Random(f"map:{seed}")
    names = rng.sample([f"{a.title()} {n.title()}" for a in words.ADJ for n in words.NOUN], 40)
    streets = [f"{n.title()} Street" for n in words.NOUN]
    places = [{"id": i, "name": f"{name} {cat.title()}", "category": cat,
               "address": f"{rng.randint(1, 200)} {rng.choice(streets)}",
               "x": round(rng.uniform(0, 20), 2), "y": round(rng.uniform(0, 20), 2)}
              for i, (name, cat) in enumerate(
                  ((n, rng.choice(CATEGORIES)) for n in names), 1)]

    def km(p, q):
        return round(math.dist((p["x"], p["y"]), (q["x"], q["y"])) * ROAD_FACTOR, 1)

    edges = set()
    inside = {places[0]["id"]}
    by_id = {p["id"]: p for p in places}
    while len(inside) < len(places):  # Prim's spanning tree
        a, b = min(((a, b) for a in inside for b in by_id if b not in inside),
                   key=lambda e: km(by_id[e[0]], by_id[e[1]]))
        edges.add((min(a, b), max(a, b)))
        inside.add(b)
    for p in places:
        for q in sorted((q for q in places if q is not p), key=lambda q: km(p, q))[:2]:
            edges.add((min(p["id"], q["id"]), max(p["id"], q["id"])))
    roads = [{"a": a, "b": b, "km": max(0.1, km(by_id[a], by_id[b]))} for a, b in sorted(edges)]
    return {"places": places, "roads": roads}


def shortest_route(roads: list[dict], src: int, dst: int) -> tuple[float, list[int]]:
    """Dijkstra: (length in km, place ids along the way) from src to dst."""
    graph: dict[int, list[tuple[int, float]]] = {}
    for r in roads:
        graph.setdefault(r["a"], []).append((r["b"], r["km"]))
        graph.setdefault(r["b"], []).append((r["a"], r["km"]))
    best, prev, heap = {src: 0.0}, {}, [(0.0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if u == dst:
            break
        if d > best[u]:
            continue
        for v, w in graph.get(u, []):
            if d + w < best.get(v, math.inf):
                best[v], prev[v] = d + w, u
                heapq.heappush(heap, (d + w, v))
    if dst not in best:
        return math.inf, []
    path = [dst]
    while path[-1] != src:
        path.append(prev[path[-1]])
    return round(best[dst], 1), path[::-1]


def travel_minutes(km: float, mode: str) -> int:
    """Travel time in whole minutes at the mode's speed."""
    return round(km / SPEED_KMH[mode] * 60)


def nearest(places: list[dict], place: dict, k: int = 5) -> list[dict]:
    """The k places closest to `place` in a straight line (ties by name)."""
    return sorted((q for q in places if q["id"] != place["id"]),
                  key=lambda q: (math.dist((q["x"], q["y"]), (place["x"], place["y"])),
                                 q["name"]))[:k]
