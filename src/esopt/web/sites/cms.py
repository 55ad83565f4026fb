"""The shop admin (CMS, Magento-admin-like) data: products, customers, orders."""

from __future__ import annotations

import random

from esopt.web.sites import words

SCHEMA = """
CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT UNIQUE NOT NULL, name TEXT NOT NULL,
                       price REAL NOT NULL, qty INTEGER NOT NULL, status TEXT NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
                        customer_group TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,
                     status TEXT NOT NULL, total REAL NOT NULL, placed TEXT NOT NULL);
"""
STATUSES = ("pending", "processing", "complete", "canceled")
GOODS = ("Tee", "Hoodie", "Jacket", "Backpack", "Water Bottle", "Yoga Mat", "Watch", "Cap")


def generate(seed: int) -> dict[str, list[dict]]:
    """The shop admin's rows by table, a function of the seed."""
    rng = random.Random(f"cms:{seed}")
    names = rng.sample([f"{a.title()} {n.title()} {g}" for a in words.ADJ for n in words.NOUN
                        for g in GOODS], 36)
    products = [{"id": i, "sku": f"{name.split()[-1][:2].upper()}-{100 + 7 * i}", "name": name,
                 "price": round(rng.uniform(5, 150), 2), "qty": rng.randint(0, 300),
                 "status": rng.choice(["enabled"] * 4 + ["disabled"])}
                for i, name in enumerate(names, 1)]
    people = rng.sample([f"{a.title()} {b.title()}" for a in words.FIRST for b in words.LAST], 20)
    customers = [{"id": i, "name": p, "email": f"{p.lower().replace(' ', '.')}@example.com",
                  "customer_group": rng.choice(["General", "Wholesale", "Retailer"])}
                 for i, p in enumerate(people, 1)]
    orders = [{"id": 1000 + i, "customer_id": rng.randint(1, len(customers)),
               "status": rng.choice(STATUSES), "total": round(rng.uniform(10, 600), 2),
               "placed": f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"}
              for i in range(1, 41)]
    return {"products": products, "customers": customers, "orders": orders}
