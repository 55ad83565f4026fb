"""The shop's (OSS, a customer's view) data: categories, products, reviews, the customer's
past orders, cart and wish list."""

from __future__ import annotations

import random

from esopt.web.sites import words

SCHEMA = """
CREATE TABLE categories (slug TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, category TEXT NOT NULL, name TEXT UNIQUE NOT NULL,
                       price REAL NOT NULL, description TEXT NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL,
                      author TEXT NOT NULL, rating INTEGER NOT NULL, title TEXT NOT NULL,
                      body TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, placed TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL, product_id INTEGER NOT NULL,
                          qty INTEGER NOT NULL, price REAL NOT NULL);
CREATE TABLE cart (product_id INTEGER PRIMARY KEY, qty INTEGER NOT NULL);
CREATE TABLE wishlist (product_id INTEGER PRIMARY KEY);
"""
AGENT = "Emma Lopez"
CATEGORIES = {"kitchen": ("Kettle", "Skillet", "Teapot", "Blender", "Cutting Board"),
              "garden": ("Hose", "Shovel", "Planter", "Rake", "Sprinkler"),
              "office": ("Desk Lamp", "Notebook", "Stapler", "Monitor Stand", "Pen Set"),
              "outdoor": ("Tent", "Sleeping Bag", "Lantern", "Hiking Pole", "Cooler"),
              "audio": ("Headphones", "Speaker", "Microphone", "Turntable", "Earbuds"),
              "toys": ("Puzzle", "Kite", "Robot Kit", "Board Game", "Yo-Yo")}


def generate(seed: int) -> dict[str, list[dict]]:
    """The shop's rows by table, a function of the seed."""
    rng = random.Random(f"shop:{seed}")
    data = {"categories": [], "products": [], "reviews": [], "orders": [], "order_items": [],
            "cart": [], "wishlist": []}
    for slug, goods in CATEGORIES.items():
        data["categories"].append({"slug": slug, "name": slug.title()})
        names = rng.sample([f"{a.title()} {g}" for a in words.ADJ for g in goods], 9)
        prices = rng.sample(range(399, 19999), len(names))  # distinct: a unique cheapest
        for name, cents in zip(names, prices, strict=True):
            pid = len(data["products"]) + 1
            data["products"].append({"id": pid, "category": slug, "name": name,
                                     "price": cents / 100,
                                     "description": f"A {rng.choice(words.ADJ)} choice."})
            for _ in range(rng.randint(0, 5)):
                data["reviews"].append({
                    "id": len(data["reviews"]) + 1, "product_id": pid,
                    "author": rng.choice(words.FIRST).title(), "rating": rng.randint(1, 5),
                    "title": f"{rng.choice(words.ADJ).title()}!", "body": "Works as described."})
    for oid in range(1, 13):
        data["orders"].append({"id": 100 + oid, "status": rng.choice(["complete", "canceled"]),
                               "placed": f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"})
        for p in rng.sample(data["products"], rng.randint(1, 3)):
            data["order_items"].append({"order_id": 100 + oid, "product_id": p["id"],
                                        "qty": rng.randint(1, 3), "price": p["price"]})
    return data


def order_total(data: dict, order_id: int) -> float:
    """An order's total: the sum of its items' price x quantity."""
    return round(sum(i["price"] * i["qty"] for i in data["order_items"]
                     if i["order_id"] == order_id), 2)
