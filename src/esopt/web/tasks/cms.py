"""Shop-admin tasks: prices, stock, order counts and totals, customers' emails; change
prices and stock, disable products, cancel orders."""

from __future__ import annotations

import random

from esopt.web.task import Check, Task, click, search, stop, task_adder, type_


def make_tasks(data: dict, rng: random.Random, per_template: int) -> list[Task]:
    """The shop admin's tasks over its seeded data."""
    products, orders, customers = data["products"], data["orders"], data["customers"]
    tasks: list[Task] = []

    add = task_adder("cms", tasks)

    def edit(p):
        return (click("link", "Products"), *search("Search by keyword", p["name"]),
                click("link", p["name"]))

    for p in rng.sample(products, per_template):
        price = f"{p['price']:.2f}"
        add("info", f"What is the price of the product with SKU {p['sku']}?",
            Check("must_include", (price,)),
            [click("link", "Products"), *search("Search by keyword", p["sku"]), stop(f"${price}")])
    for p in rng.sample(products, per_template):
        add("info", f"How many units of {p['name']} are in stock?",
            Check("exact_match", (str(p["qty"]),)), [*edit(p), stop(str(p["qty"]))])
    for status in rng.sample(["pending", "processing", "complete", "canceled"], 4):
        n = sum(1 for o in orders if o["status"] == status)
        add("info", f"How many orders have the status {status}?",
            Check("exact_match", (str(n),)),
            [click("link", "Orders"), type_("combobox", "Status", status.title()),
             click("button", "Filter"), stop(str(n))])
    for c in rng.sample(customers, per_template):
        add("info", f"What is the email address of the customer {c['name']}?",
            Check("exact_match", (c["email"],)), [click("link", "Customers"), stop(c["email"])])
    for o in rng.sample(orders, per_template):
        total = f"{o['total']:.2f}"
        add("info", f"What is the grand total of order #{o['id']}?",
            Check("must_include", (total,)),
            [click("link", "Orders"), click("link", f"#{o['id']}"), stop(f"${total}")])
    for p in rng.sample(products, per_template):
        new = round(p["price"] + rng.choice([-2, 3, 5, 10]), 2)
        add("content", f"Change the price of {p['name']} to ${new:.2f}.",
            Check("db", sql="SELECT ROUND(price, 2) FROM products WHERE id = ?",
                  params=(p["id"],), expected=((new,),)),
            [*edit(p), type_("textbox", "Price", f"{new:.2f}"), click("button", "Save"), stop()])
    for p in rng.sample([p for p in products if p["status"] == "enabled"], per_template):
        add("content", f"Disable the product {p['name']}.",
            Check("db", sql="SELECT status, price, qty FROM products WHERE id = ?",
                  params=(p["id"],), expected=(("disabled", p["price"], p["qty"]),)),
            [*edit(p), type_("combobox", "Status", "Disabled"), click("button", "Save"), stop()])
    for o in rng.sample([o for o in orders if o["status"] in ("pending", "processing")],
                        per_template):
        add("content", f"Cancel order #{o['id']}.",
            Check("db", sql="SELECT status FROM orders WHERE id = ?", params=(o["id"],),
                  expected=(("canceled",),)),
            [click("link", "Orders"), click("link", f"#{o['id']}"),
             click("button", "Cancel order"), stop()])
    for p in rng.sample(products, per_template):
        qty = rng.randint(10, 500)
        add("content", f"Set the stock quantity of {p['name']} to {qty}.",
            Check("db", sql="SELECT qty FROM products WHERE id = ?", params=(p["id"],),
                  expected=((qty,),)),
            [*edit(p), type_("textbox", "Quantity", str(qty)), click("button", "Save"), stop()])
    return tasks
