"""The shop's pages: categories (sortable), products with reviews, cart and checkout,
wish list, the customer's orders, search."""

from __future__ import annotations

from flask import redirect, request

from esopt.web.apps.common import (
    EpisodeStore,
    commit,
    create_base_app,
    db,
    esc,
    form,
    like_pattern,
    link,
    one,
    page,
    rows,
    select,
    table,
    text_area,
    text_input,
)
from esopt.web.sites.shop import AGENT

_SORTS = {"name": "name", "price_asc": "price ASC", "price_desc": "price DESC"}


def _search_box(q: str = "") -> str:
    return form("/search", text_input("q", "Search products", q, "search"), "Search", "get")


def _product_table(products) -> str:
    return table(["Product", "Price"], [[link(f"/product/{p['id']}", p["name"]),
                                         f"${p['price']:.2f}"] for p in products])


def create_app(store: EpisodeStore, admin_key: str):
    """The shop's Flask app."""
    app = create_base_app("shop", store, admin_key)

    def show(title: str, body: str) -> str:
        return page("One Stop Market", title, body, [
            ("/", "Home"), ("/cart", "My Cart"), ("/wishlist", "My Wish List"),
            ("/account/orders", "My Orders")])

    @app.get("/")
    def index():
        cats = "".join(f"<li>{link('/category/' + c['slug'], c['name'])}</li>"
                       for c in rows("SELECT * FROM categories ORDER BY name"))
        return show(f"Welcome, {AGENT}", _search_box() + f"<h2>Categories</h2><ul>{cats}</ul>")

    @app.get("/category/<slug>")
    def category(slug):
        c = one("SELECT * FROM categories WHERE slug = ?", slug)
        sort = request.args.get("sort", "name")
        sort = sort if sort in _SORTS else "name"
        found = rows(f"SELECT * FROM products WHERE category = ? ORDER BY {_SORTS[sort]}", slug)
        chooser = form(f"/category/{slug}", select("sort", "Sort by", [
            ("name", "Product Name"), ("price_asc", "Price: low to high"),
            ("price_desc", "Price: high to low")], sort), "Sort", "get")
        return show(c["name"], chooser + f"<p>{len(found)} items</p>" + _product_table(found))

    @app.get("/search")
    def search():
        q = request.args.get("q", "").strip()
        found = rows("SELECT * FROM products WHERE name LIKE ? ESCAPE '\\' ORDER BY name",
                     like_pattern(q)) if q else []
        return show("Search results", _search_box(q) + _product_table(found))

    @app.get("/product/<int:pid>")
    def product(pid):
        p = one("SELECT * FROM products WHERE id = ?", pid)
        reviews = rows("SELECT * FROM reviews WHERE product_id = ? ORDER BY id", pid)
        mean = sum(r["rating"] for r in reviews) / len(reviews) if reviews else 0
        items = "".join(f"<li>{esc(r['title'])} {r['rating']} stars by {esc(r['author'])}: "
                        f"{esc(r['body'])}</li>" for r in reviews)
        note = {"cart": "<p>You added the product to your cart.</p>",
                "wish": "<p>You added the product to your wish list.</p>",
                "review": "<p>Thank you for your review.</p>"}.get(request.args.get("done"), "")
        body = (note + f"<p>Price: ${p['price']:.2f}</p><p>Rating: {mean:.1f} out of 5 "
                f"({len(reviews)} reviews)</p><p>{esc(p['description'])}</p>"
                + form(f"/product/{pid}/cart", text_input("qty", "Qty", 1), "Add to Cart")
                + form(f"/product/{pid}/wish", "", "Add to Wish List")
                + f"<h2>Reviews</h2><ul>{items}</ul>"
                + form(f"/product/{pid}/review", select("rating", "Rating", [
                    (str(k), f"{k} stars") for k in range(1, 6)], "5")
                    + text_input("title", "Summary") + text_area("body", "Review"),
                    "Submit Review"))
        return show(p["name"], body)

    @app.post("/product/<int:pid>/cart")
    def add_to_cart(pid):
        one("SELECT id FROM products WHERE id = ?", pid)
        qty = request.form.get("qty", "1").strip()
        qty = int(qty) if qty.isdigit() and 0 < int(qty) <= 99 else 1
        commit("INSERT INTO cart (product_id, qty) VALUES (?, ?) ON CONFLICT(product_id) "
               "DO UPDATE SET qty = qty + excluded.qty", pid, qty)
        return redirect(f"/product/{pid}?done=cart", 303)

    @app.post("/product/<int:pid>/wish")
    def add_to_wishlist(pid):
        one("SELECT id FROM products WHERE id = ?", pid)
        commit("INSERT OR IGNORE INTO wishlist (product_id) VALUES (?)", pid)
        return redirect(f"/product/{pid}?done=wish", 303)

    @app.post("/product/<int:pid>/review")
    def review(pid):
        one("SELECT id FROM products WHERE id = ?", pid)
        f = request.form
        rating = f.get("rating", "")
        if rating in {"1", "2", "3", "4", "5"} and f.get("title", "").strip():
            commit("INSERT INTO reviews (product_id, author, rating, title, body) VALUES "
                   "(?, ?, ?, ?, ?)", pid, AGENT, int(rating), f["title"].strip()[:200],
                   f.get("body", "").strip()[:2000])
        return redirect(f"/product/{pid}?done=review", 303)

    @app.get("/cart")
    def cart():
        items = rows("SELECT p.*, c.qty FROM cart c JOIN products p ON p.id = c.product_id "
                     "ORDER BY p.name")
        total = sum(i["price"] * i["qty"] for i in items)
        body = table(["Product", "Qty", "Subtotal"], [
            [link(f"/product/{i['id']}", i["name"]), str(i["qty"]),
             f"${i['price'] * i['qty']:.2f}"] for i in items]) + f"<p>Total: ${total:.2f}</p>"
        if items:
            body += form("/checkout", "", "Proceed to Checkout")
        return show("Shopping Cart", body)

    @app.post("/checkout")
    def checkout():
        items = rows("SELECT p.id, p.price, c.qty FROM cart c JOIN products p ON "
                     "p.id = c.product_id")
        if not items:
            return redirect("/cart", 303)
        con = db()
        oid = con.execute("SELECT MAX(id) + 1 FROM orders").fetchone()[0]
        con.execute("INSERT INTO orders (id, placed, status) VALUES (?, '2024-01-01', "
                    "'pending')", (oid,))
        con.executemany("INSERT INTO order_items (order_id, product_id, qty, price) VALUES "
                        "(?, ?, ?, ?)", [(oid, i["id"], i["qty"], i["price"]) for i in items])
        con.execute("DELETE FROM cart")
        con.commit()
        return redirect(f"/account/orders/{oid}", 303)

    @app.get("/wishlist")
    def wishlist():
        found = rows("SELECT p.* FROM wishlist w JOIN products p ON p.id = w.product_id "
                     "ORDER BY p.name")
        return show("My Wish List", _product_table(found))

    @app.get("/account/orders")
    def orders():
        found = rows("SELECT o.*, (SELECT SUM(price * qty) FROM order_items i WHERE "
                     "i.order_id = o.id) AS total FROM orders o ORDER BY o.id DESC")
        return show("My Orders", table(["Order", "Date", "Total", "Status"], [
            [link(f"/account/orders/{o['id']}", f"#{o['id']}"), o["placed"],
             f"${o['total']:.2f}", o["status"]] for o in found]))

    @app.get("/account/orders/<int:oid>")
    def order(oid):
        o = one("SELECT * FROM orders WHERE id = ?", oid)
        items = rows("SELECT p.name, i.qty, i.price FROM order_items i JOIN products p ON "
                     "p.id = i.product_id WHERE i.order_id = ?", oid)
        total = sum(i["price"] * i["qty"] for i in items)
        return show(f"Order #{oid}", f"<p>Status: {o['status']}</p><p>Placed: {o['placed']}"
                    "</p>" + table(["Product", "Qty", "Price"], [
                        [esc(i["name"]), str(i["qty"]), f"${i['price']:.2f}"] for i in items])
                    + f"<p>Grand Total: ${total:.2f}</p>")

    return app
