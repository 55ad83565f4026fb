"""Shop tasks: prices, the cheapest in a category, order totals, review counts; add to
cart, buy, add to the wish list, write a review."""

from __future__ import annotations

import random

from esopt.web.sites.shop import AGENT, order_total
from esopt.web.task import Check, Task, click, search, stop, task_adder, type_


def make_tasks(data: dict, rng: random.Random, per_template: int) -> list[Task]:
    """The shop's tasks over its seeded data."""
    products, tasks = data["products"], []
    n_reviews = {p["id"]: 0 for p in products}
    for r in data["reviews"]:
        n_reviews[r["product_id"]] += 1

    add = task_adder("shop", tasks)

    def find(p):
        return (*search("Search products", p["name"]), click("link", p["name"]))

    for p in rng.sample(products, per_template):
        price = f"{p['price']:.2f}"
        add("info", f"How much does the {p['name']} cost?", Check("must_include", (price,)),
            [*search("Search products", p["name"]), stop(f"${price}")])
    for slug in rng.sample(sorted({p["category"] for p in products}), per_template):
        cheapest = min((p for p in products if p["category"] == slug), key=lambda p: p["price"])
        add("info", f"What is the cheapest product in the {slug.title()} category?",
            Check("exact_match", (cheapest["name"],)),
            [click("link", slug.title()), type_("combobox", "Sort by", "Price: low to high"),
             click("button", "Sort"), stop(cheapest["name"])])
    for o in rng.sample(data["orders"], per_template):
        total = f"{order_total(data, o['id']):.2f}"
        add("info", f"How much did I pay in total for order #{o['id']}?",
            Check("must_include", (total,)),
            [click("link", "My Orders"), click("link", f"#{o['id']}"), stop(f"${total}")])
    for p in rng.sample(products, per_template):
        add("info", f"How many reviews does the {p['name']} have?",
            Check("exact_match", (str(n_reviews[p["id"]]),)),
            [*find(p), stop(str(n_reviews[p["id"]]))])
    for p in rng.sample(products, per_template):
        qty = rng.randint(2, 5)
        add("content", f"Add {qty} of the {p['name']} to my cart.",
            Check("db", sql="SELECT product_id, qty FROM cart", expected=((p["id"], qty),)),
            [*find(p), type_("textbox", "Qty", str(qty)), click("button", "Add to Cart"),
             stop()])
    for p in rng.sample(products, per_template):
        add("content", f"Buy one {p['name']}.",
            Check("db", sql="SELECT i.product_id, i.qty FROM orders o JOIN order_items i ON "
                  "i.order_id = o.id WHERE o.status = 'pending'", expected=((p["id"], 1),)),
            [*find(p), click("button", "Add to Cart"), click("link", "My Cart"),
             click("button", "Proceed to Checkout"), stop()])
    for p in rng.sample(products, per_template):
        add("content", f"Add the {p['name']} to my wish list.",
            Check("db", sql="SELECT product_id FROM wishlist", expected=((p["id"],),)),
            [*find(p), click("button", "Add to Wish List"), stop()])
    for p in rng.sample(products, per_template):
        stars, title = rng.randint(1, 5), rng.choice(["Great value", "Not for me", "Solid"])
        add("content", f'Write a {stars}-star review of the {p["name"]} with the summary '
            f'"{title}".',
            Check("db", sql="SELECT rating, title FROM reviews WHERE product_id = ? AND "
                  "author = ?", params=(p["id"], AGENT), expected=((stars, title),)),
            [*find(p), type_("combobox", "Rating", f"{stars} stars"),
             type_("textbox", "Summary", title), click("button", "Submit Review"), stop()])
    return tasks
